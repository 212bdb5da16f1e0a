package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
)

// DirName is the name of the state root directory, found like git finds
// .git.
const DirName = ".crew"

// Root is a state root: where runs and the per-agent mail tree live.
// Find and Init return one on the file system, the .crew directory
// holding state/runs and state/mail; RemoteRoot returns one on a
// RemoteStore (NATS JetStream), with no directory at all. The runs it
// opens have the same operations either way; only their store differs.
type Root struct {
	Dir     string    // absolute path of the .crew directory; "" on a RemoteStore
	Perm    crew.Perm // modes for new files and directories
	MaxBody int       // largest message body in bytes; 0 means DefaultMaxBody

	remote RemoteStore // set: runs and mail live there, not under Dir
}

// RemoteRoot returns a root whose runs and mail tree live in s (a
// natsstore.Store: NATS JetStream), for a leader and workers that share
// no files. It touches no file.
func RemoteRoot(s RemoteStore) *Root { return &Root{remote: s} }

// Remote returns the RemoteStore the root lives in, or nil for a root on
// the file system.
func (r *Root) Remote() RemoteStore { return r.remote }

// String names the root in messages: its directory, or its store
// ("nats://10.0.0.5:4222", without credentials).
func (r *Root) String() string {
	if r.remote != nil {
		return r.remote.String()
	}
	return r.Dir
}

// DefaultMaxBody is the default body limit (SPEC §2): 1 MiB.
const DefaultMaxBody = 1 << 20

// Init creates a state root at dir/.crew (or dir itself when it is named
// .crew) and returns it. Initialising an existing root is not an error.
func Init(dir string, perm crew.Perm) (*Root, error) {
	if filepath.Base(dir) != DirName {
		dir = filepath.Join(dir, DirName)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r := &Root{Dir: abs, Perm: perm}
	for _, d := range []string{r.Dir, filepath.Join(r.Dir, "state"), r.runsDir(), r.MailTree().Root} {
		if err := mkdir(d, perm); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Find returns the state root for dir: dir itself if it is a .crew
// directory or holds one, else the nearest ancestor that holds one. No
// state root is crew.ErrNotFound, with a hint to run crew init.
func Find(dir string, perm crew.Perm) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if filepath.Base(abs) == DirName && isDir(abs) {
		return checkLayout(&Root{Dir: abs, Perm: perm})
	}
	for d := abs; ; d = filepath.Dir(d) {
		if isDir(filepath.Join(d, DirName)) {
			return checkLayout(&Root{Dir: filepath.Join(d, DirName), Perm: perm})
		}
		if filepath.Dir(d) == d {
			return nil, fmt.Errorf("no .crew directory in %s or any parent; run crew init: %w", abs, crew.ErrNotFound)
		}
	}
}

// checkLayout returns r if the directories crew keeps inside it (state,
// state/runs, state/mail) are real directories or missing: one that is a
// symbolic link (or not a directory) is refused, with crew.ErrInvalid, so
// that no write goes through it (SPEC §7.6). The .crew directory itself
// may be a link: it is where the user put the state root.
func checkLayout(r *Root) (*Root, error) {
	for _, d := range []string{filepath.Join(r.Dir, "state"), r.runsDir(), r.MailTree().Root} {
		if err := realDir(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	return r, nil
}

// realDir returns nil if dir is a directory and not a symbolic link to
// one; an error wrapping crew.ErrInvalid if it is a link or no directory;
// Lstat's error (os.ErrNotExist for a missing one) otherwise.
func realDir(dir string) error {
	st, err := os.Lstat(dir)
	switch {
	case err != nil:
		return err
	case st.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link; crew does not follow links inside the state root: %w", dir, crew.ErrInvalid)
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory: %w", dir, crew.ErrInvalid)
	}
	return nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// mkdir creates dir with perm.Dir if missing; an existing path must be a
// real directory, not a symlink (SPEC §7.6: writes never follow symlinks in
// the state root).
func mkdir(dir string, perm crew.Perm) error {
	if err := realDir(dir); !errors.Is(err, os.ErrNotExist) {
		return err // there (nil), or refused
	}
	if err := fsys.Mkdir(dir, perm.Dir); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return os.Chmod(dir, perm.Dir) // umask must not loosen or tighten the documented mode
}

func (r *Root) runsDir() string { return filepath.Join(r.Dir, "state", "runs") }

// MailTree returns the per-agent mail tree of a root on the file system
// (SPEC §5): .crew/state/mail.
func (r *Root) MailTree() mailbox.Tree {
	return mailbox.Tree{Root: filepath.Join(r.Dir, "state", "mail"), Perm: r.Perm}
}

// Mail returns the root's per-agent mail tree: MailTree on the file
// system, the RemoteStore's otherwise.
func (r *Root) Mail() mailbox.Store {
	if r.remote != nil {
		return r.remote.Mail()
	}
	return r.MailTree()
}

func (r *Root) maxBody() int {
	if r.MaxBody > 0 {
		return r.MaxBody
	}
	return DefaultMaxBody
}

// CreateOptions are the settings of a new run.
type CreateOptions struct {
	ID     string // run id; generated from the time when empty
	Title  string
	Leader string // leader agent name; "leader" when empty
	Dir    string // working directory; the process's when empty
}

// NewRunID returns a run id that sorts by creation time:
// YYYYMMDD-HHMMSS-mmm-xxxx (UTC, milliseconds, 4 random hex digits).
func NewRunID(now time.Time) string {
	var b [2]byte
	rand.Read(b[:])
	now = now.UTC()
	return fmt.Sprintf("%s-%03d-%s", now.Format("20060102-150405"), now.Nanosecond()/1e6, hex.EncodeToString(b[:]))
}

// Create makes a new run: its directory, manifest.json, an events.jsonl
// holding run.created, the mailbox directory and the leader's mail
// directory. The log is written to a temporary file, fsynced and renamed
// into place (then the directory fsynced), so a run either exists whole or
// not at all. On a RemoteStore the run is its log's first event there
// (createRemote). An id already in use (in any letter case) is
// crew.ErrConflict; a bad id is crew.ErrInvalid.
func (r *Root) Create(opts CreateOptions) (*Run, error) {
	now := events.Now()
	if opts.ID == "" {
		opts.ID = NewRunID(now.Time)
	}
	if opts.Leader == "" {
		opts.Leader = "leader"
	}
	if err := crew.ValidateID("run", opts.ID); err != nil {
		return nil, err
	}
	if err := crew.ValidateID("agent", opts.Leader); err != nil {
		return nil, err
	}
	if !utf8.ValidString(opts.Title) {
		return nil, fmt.Errorf("run title is not valid UTF-8; crew refuses to alter it: %w", crew.ErrInvalid)
	}
	if opts.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		opts.Dir = wd
	}
	m := state.Manifest{ID: opts.ID, Title: opts.Title, Leader: opts.Leader, CreatedAt: now, Dir: opts.Dir}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	ev := events.Event{Seq: 1, At: now, Type: events.RunCreated, Run: m.ID, Actor: m.Leader, Data: data}
	if r.remote != nil {
		return r.createRemote(&ev)
	}
	if err := mkdir(r.runsDir(), r.Perm); err != nil {
		return nil, err
	}
	// One creator at a time, from the check for an id in use (in any
	// letter case) to the run's appearance: two ids that differ only in
	// case must not both be made (SPEC §1).
	unlock, err := fsys.LockFile(filepath.Join(r.Dir, "state", ".runs.lock"), r.Perm.File)
	if err != nil {
		return nil, err
	}
	defer unlock()
	existing, err := r.runIDs()
	if err != nil {
		return nil, err
	}
	for _, id := range existing {
		if crew.SameID(id, opts.ID) {
			return nil, fmt.Errorf("run %s already exists: %w", id, crew.ErrConflict)
		}
	}
	line, err := events.Marshal(&ev)
	if err != nil {
		return nil, err
	}
	undo, err := r.createMailbox(m.Leader)
	if err != nil {
		return nil, err
	}
	created := false
	defer func() {
		if !created {
			undo()
		}
	}()
	// Build the run in a hidden directory, then rename it into place: the
	// run appears whole or not at all.
	tmp, err := os.MkdirTemp(r.runsDir(), ".new-"+m.ID+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // after a successful rename, tmp no longer exists
	if err := os.Chmod(tmp, r.Perm.Dir); err != nil {
		return nil, err
	}
	mj, _ := json.MarshalIndent(m, "", "  ")
	files := []struct {
		name string
		data []byte
	}{{"manifest.json", append(mj, '\n')}, {"events.jsonl", line}, {"run.lock", nil}}
	for _, f := range files {
		if err := writeFileSync(filepath.Join(tmp, f.name), f.data, r.Perm.File); err != nil {
			return nil, err
		}
	}
	if err := mkdir(filepath.Join(tmp, "mailbox"), r.Perm); err != nil {
		return nil, err
	}
	for _, name := range mailbox.Files {
		// Empty projections (not fsynced: the log can rebuild them), so
		// that a mailbox file found missing later is known to be lost.
		if err := os.WriteFile(filepath.Join(tmp, "mailbox", name), nil, r.Perm.File); err != nil {
			return nil, err
		}
		if err := os.Chmod(filepath.Join(tmp, "mailbox", name), r.Perm.File); err != nil {
			return nil, err
		}
	}
	if err := syncDir(tmp); err != nil {
		return nil, err
	}
	dir := filepath.Join(r.runsDir(), m.ID)
	if err := fsys.RenameFile(tmp, dir); err != nil {
		if errors.Is(err, os.ErrExist) || isDir(dir) {
			return nil, fmt.Errorf("run %s already exists: %w", m.ID, crew.ErrConflict)
		}
		return nil, err
	}
	if err := syncDir(r.runsDir()); err != nil {
		os.Rename(dir, tmp) // not durable, so not created: take it back
		return nil, err
	}
	created = true
	return r.Open(m.ID)
}

// createRemote is Create on a RemoteStore: the run's log starts with its
// run.created event (Backend.CreateRun: on NATS, a new stream), and the
// leader gets a mailbox.
func (r *Root) createRemote(first *events.Event) (*Run, error) {
	if err := r.remote.CreateRun(context.Background(), first); err != nil {
		return nil, err
	}
	if err := r.remote.Mail().Create(first.Actor); err != nil {
		return nil, err
	}
	return r.Open(first.Run)
}

// createMailbox makes agent's mailbox in the mail tree if it has none, and
// returns a function that removes it again if this call made it, for an
// operation that then fails: a failed operation leaves every file as it
// was (SPEC §7.5). The function removes only empty directories. On a
// RemoteStore the mailbox stays (an empty mailbox, which the agent's
// first run message would create anyway).
func (r *Root) createMailbox(agent string) (undo func(), err error) {
	if r.remote != nil {
		return func() {}, r.remote.Mail().Create(agent)
	}
	tree := r.MailTree()
	if _, err := os.Lstat(tree.Dir(agent)); err == nil || crew.ValidateID("agent", agent) != nil {
		// There already (or a link, which Create refuses): not ours to remove.
		return func() {}, tree.Create(agent)
	}
	undo = func() {
		os.Remove(filepath.Join(tree.Dir(agent), mailbox.ArchiveDir))
		os.Remove(tree.Dir(agent))
	}
	if err := tree.Create(agent); err != nil {
		undo()
		return nil, err
	}
	return undo, nil
}

// runIDs lists the run directories (hidden ones, runs being created, are
// skipped), or the runs of the RemoteStore, sorted.
func (r *Root) runIDs() ([]string, error) {
	if r.remote != nil {
		ids, err := r.remote.Runs(context.Background())
		sort.Strings(ids)
		return ids, err
	}
	ents, err := os.ReadDir(r.runsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// List returns the manifests of all runs, oldest first. A run whose
// manifest cannot be read is returned in bad with the reason.
func (r *Root) List() (runs []state.Manifest, bad []error, err error) {
	ids, err := r.runIDs()
	if err != nil {
		return nil, nil, err
	}
	for _, id := range ids {
		m, err := r.manifest(id)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		runs = append(runs, m)
	}
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].CreatedAt.Before(runs[j].CreatedAt.Time) })
	return runs, bad, nil
}

// manifest returns run id's manifest: manifest.json, or on a
// RemoteStore the Data of the run's first event (run.created).
func (r *Root) manifest(id string) (state.Manifest, error) {
	if r.remote == nil {
		return readManifest(filepath.Join(r.runsDir(), id))
	}
	var m state.Manifest
	var first *events.Event
	err := r.remote.Read(context.Background(), id, 0, func(e *events.Event) error {
		first = e
		return events.StopScan
	})
	if err != nil && err != events.StopScan {
		return m, err
	}
	if first == nil || first.Type != events.RunCreated || json.Unmarshal(first.Data, &m) != nil || m.ID != id {
		return m, fmt.Errorf("run %s on %s does not start with its run.created event: %w", id, r.remote, crew.ErrDamaged)
	}
	return m, nil
}

func readManifest(dir string) (state.Manifest, error) {
	var m state.Manifest
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return m, fmt.Errorf("read manifest of run %s: %w", filepath.Base(dir), err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("read manifest of run %s: %v: %w", filepath.Base(dir), err, crew.ErrDamaged)
	}
	return m, nil
}

// Open opens an existing run. An unknown run is crew.ErrNotFound; a run
// directory that is a symbolic link is refused.
func (r *Root) Open(id string) (*Run, error) {
	if err := crew.ValidateID("run", id); err != nil {
		return nil, err
	}
	if r.remote != nil {
		m, err := r.manifest(id)
		if err != nil {
			return nil, err
		}
		run := &Run{root: r, Manifest: m}
		run.remote = &remoteLog{s: r.remote, run: id, project: run.projectTree}
		return run, nil
	}
	dir := filepath.Join(r.runsDir(), id)
	st, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no run %s in %s (crew run list shows the runs): %w", id, r.Dir, crew.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if st.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("run directory %s is a symbolic link; crew does not follow links in the state root: %w", dir, crew.ErrInvalid)
	}
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	return &Run{root: r, dir: dir, Manifest: m}, nil
}

// Latest returns the most recently created run, for commands given no run.
func (r *Root) Latest() (*Run, error) {
	runs, _, err := r.List()
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("no runs yet; create one with crew run create: %w", crew.ErrNotFound)
	}
	return r.Open(runs[len(runs)-1].ID)
}

// writeFileSync creates path exclusively with mode perm, writes data and
// fsyncs it.
func writeFileSync(path string, data []byte, perm os.FileMode) error {
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := fsys.Write(f, data); err != nil {
		f.Close()
		os.Remove(path) // created above (O_EXCL): a failure leaves nothing
		return err
	}
	if err := fsys.SyncFile(f); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(path, perm)
}

// syncDir fsyncs a directory, making the names created in it durable
// (fsync(2) on the directory, as Maildir delivery requires).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := fsys.SyncFile(d); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
