package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
)

// DirName is the name of the state root directory, found like git finds
// .git.
const DirName = ".crew"

// Store is a state root on the file system: the .crew directory, which
// holds state/runs/<run>/ and the per-agent mail tree state/mail/
// (docs/files.md, Layout). It implements store.Store.
type Store struct {
	dir  string    // absolute path of the .crew directory
	Perm crew.Perm // modes for new files and directories
	// KeepLogs makes Open return one Log per run for the Store's life
	// (the first Open's), as store/nats's Options.KeepLogs does: the
	// state it keeps from its last commit is used by the next, which
	// reads only what other processes appended since (or the whole
	// state again when the log was replaced), where a new Log loads it
	// from tasks.json and replays the log after it, and the
	// projections of commits made one after another share one hold of
	// the run lock. It keeps no lock between operations: another
	// process takes the lock as soon as this one's projections are
	// written (the log and mail directories a Log keeps open are checked
	// before they are used again: the package doc's lock epoch). manifest.json is read once, by the first Open; when it
	// has changed since (crew repair rewrote it, or the run was made
	// anew), the run is opened anew. For a
	// process that serves many operations (crew mcp, crew serve). Set it
	// before the Store is used. Without it, each Open is a new Log, as
	// another process's.
	KeepLogs bool
	// background counts the goroutines of its runs still writing
	// projections after their operations returned (Close waits).
	background counter
	// owing are the Logs that let the run lock go owing tasks.json a
	// state (unhold), each with the timer that writes it once the Log
	// has been idle snapshotIdle; Close writes them at once.
	owingMu sync.Mutex
	owing   map[*Log]*time.Timer

	mu   sync.Mutex
	logs map[string]keptLog // by run id, with KeepLogs
}

// A keptLog is the Log a Store with KeepLogs returns for a run, and what
// Lstat said of the manifest.json it read.
type keptLog struct {
	l        *Log
	manifest os.FileInfo
}

// sameVersion reports whether a and b, what Lstat said of a file at two
// times, are the same file unchanged: the same inode, modification time,
// change time (where the system gives it: one a program cannot set back,
// as touch -r sets the modification time) and size (an inode number
// alone may be reused once its file is deleted).
func sameVersion(a, b os.FileInfo) bool {
	ca, _ := fsys.ChangeTime(a)
	cb, _ := fsys.ChangeTime(b)
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && ca.Equal(cb) && a.Size() == b.Size()
}

// Close waits until the runs opened through r have written the
// projections of every operation they committed: those of an
// asynchronous Log (SetAsync), the snapshots (tasks.json, open.jsonl) a
// synchronous operation leaves to be written after it returns, and the
// state a Log let the run lock go owing (tasks.json is written every
// snapshotEvery events, not at every let-go), taking the run lock for
// it: tasks.json when it is due, else the projection mark. A process that ends without it leaves them behind the log, which
// the next writer catches up on. Operations may go on meanwhile (Close
// then also waits for theirs). It returns nil; the Store stays usable.
func (r *Store) Close() error {
	r.background.wait()
	r.owingMu.Lock()
	owing := r.owing
	r.owing = nil
	for _, t := range owing {
		t.Stop()
	}
	r.owingMu.Unlock()
	for l := range owing {
		l.flushSnapshot() // a failure leaves tasks.json behind, which readers replay
	}
	r.background.wait()
	return nil
}

// snapshotIdle is how long a Log that let the run lock go owing
// tasks.json a state waits for its next commit before it takes the lock
// again to write it: a burst of commits one per lock epoch (crew serve
// answering MCP calls back to back) does not rewrite tasks.json each
// time, and a run at rest has it current, so that the next process to
// write need not replay and project again what this one did.
var snapshotIdle = 10 * time.Millisecond

// owe notes that l let the run lock go owing tasks.json a state: it is
// written once l has been idle snapshotIdle (the timer is started again
// at each let-go), or at Close.
func (r *Store) owe(l *Log) {
	r.owingMu.Lock()
	defer r.owingMu.Unlock()
	if t, ok := r.owing[l]; ok {
		t.Reset(snapshotIdle)
		return
	}
	if r.owing == nil {
		r.owing = map[*Log]*time.Timer{}
	}
	var t *time.Timer
	t = time.AfterFunc(snapshotIdle, func() {
		r.owingMu.Lock()
		if r.owing[l] != t {
			r.owingMu.Unlock() // Close took it over
			return
		}
		delete(r.owing, l)
		r.background.add() // before the lock is let go: Close waits for it
		r.owingMu.Unlock()
		defer r.background.done()
		if _, err := os.Lstat(l.path("run.lock")); err != nil {
			return // the run is gone (removed with its directory): run.lock is not made again
		}
		l.flushSnapshot() // a failure leaves tasks.json behind, which readers replay
	})
	r.owing[l] = t
}

// A counter counts goroutines at work, like a sync.WaitGroup that may be
// waited on while more are added (Close during operations).
type counter struct {
	mu   sync.Mutex
	zero sync.Cond // signalled when n drops to 0
	n    int
}

func (c *counter) add() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *counter) done() {
	c.mu.Lock()
	if c.n--; c.n == 0 && c.zero.L != nil {
		c.zero.Broadcast()
	}
	c.mu.Unlock()
}

// wait returns once no goroutine is at work.
func (c *counter) wait() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.zero.L == nil {
		c.zero.L = &c.mu
	}
	for c.n > 0 {
		c.zero.Wait()
	}
}

// Dir returns the absolute path of the .crew directory.
func (r *Store) Dir() string { return r.dir }

// String names the store in messages: its directory.
func (r *Store) String() string { return r.dir }

// Init creates a state root at dir/.crew (or dir itself when it is named
// .crew) and returns it. Initialising an existing root is not an error.
func Init(dir string, perm crew.Perm) (*Store, error) {
	if filepath.Base(dir) != DirName {
		dir = filepath.Join(dir, DirName)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r := &Store{dir: abs, Perm: perm}
	for _, d := range []string{r.dir, filepath.Join(r.dir, "state"), r.runsDir(), r.MailTree().Root} {
		if err := mkdir(d, perm); err != nil {
			return nil, err
		}
	}
	return r, writeGitignore(r.dir, perm)
}

// gitignore is the .gitignore Init writes into .crew: it ignores every
// file there, itself too, so that a state root inside a Git work tree
// stays out of git status (runs are not source; docs/files.md, Layout).
const gitignore = "# crew's state root: runs and mail, not source (crew init wrote this).\n*\n"

// writeGitignore writes .gitignore into the state root dir, with the
// root's file mode, unless something of that name is there already (a
// user's own is kept as it is).
func writeGitignore(dir string, perm crew.Perm) error {
	path := filepath.Join(dir, ".gitignore")
	if _, err := os.Lstat(path); err == nil {
		return nil
	}
	f, err := fsys.OpenNoFollow(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm.File)
	if errors.Is(err, os.ErrExist) {
		return nil // made meanwhile
	}
	if err != nil {
		return err
	}
	f.Chmod(perm.File)
	if _, err := f.WriteString(gitignore); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Find returns the state root for dir: dir itself if it is a .crew
// directory or holds one, else the nearest ancestor that holds one. No
// state root is crew.ErrNotFound, with a hint to run crew init.
func Find(dir string, perm crew.Perm) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if filepath.Base(abs) == DirName && isDir(abs) {
		return checkLayout(&Store{dir: abs, Perm: perm})
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		// A mistyped --dir or CREW_DIR: crew init would make a second root.
		return nil, fmt.Errorf("no directory %s (crew init --dir %s makes a state root there): %w", abs, abs, crew.ErrNotFound)
	}
	for d := abs; ; d = filepath.Dir(d) {
		if isDir(filepath.Join(d, DirName)) {
			return checkLayout(&Store{dir: filepath.Join(d, DirName), Perm: perm})
		}
		if filepath.Dir(d) == d {
			return nil, fmt.Errorf("no .crew directory in %s or any parent; run crew init: %w", abs, crew.ErrNotFound)
		}
	}
}

// checkLayout returns r if the directories crew keeps inside it (state,
// state/runs, state/mail) are real directories or missing: one that is a
// symbolic link (or not a directory) is refused, with crew.ErrTampered, so
// that no write goes through it (docs/files.md, Permissions). The .crew directory itself
// may be a link: it is where the user put the state root.
func checkLayout(r *Store) (*Store, error) {
	for _, d := range []string{filepath.Join(r.dir, "state"), r.runsDir(), r.MailTree().Root} {
		if err := realDir(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	return r, nil
}

// realDir returns nil if dir is a directory and not a symbolic link to
// one; an error wrapping crew.ErrTampered if it is a link or no directory;
// Lstat's error (os.ErrNotExist for a missing one) otherwise.
func realDir(dir string) error {
	st, err := os.Lstat(dir)
	switch {
	case err != nil:
		return err
	case st.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link; crew does not follow links inside the state root: %w", dir, crew.ErrTampered)
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory: %w", dir, crew.ErrTampered)
	}
	return nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// mkdir creates dir with perm.Dir if missing; an existing path must be a
// real directory, not a symlink (docs/files.md, Permissions: writes never follow symlinks in
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

func (r *Store) runsDir() string { return filepath.Join(r.dir, "state", "runs") }

// MailTree returns the per-agent mail tree (docs/mail-tree.md):
// .crew/state/mail.
func (r *Store) MailTree() mailbox.Tree {
	return mailbox.Tree{Root: filepath.Join(r.dir, "state", "mail"), Perm: r.Perm}
}

// Mail implements store.Store: MailTree.
func (r *Store) Mail() mailbox.Store { return r.MailTree() }

// Create implements store.Store: the run's directory, manifest.json, an
// events.jsonl holding first, the mailbox directory and the leader's
// mail directory. The run is built in a hidden directory, its files
// fsynced, then renamed into place (and the directory fsynced), so it
// exists whole or not at all (docs/files.md, Write order).
func (r *Store) Create(ctx context.Context, first *events.Event) (store.Log, error) {
	m, err := store.FirstEvent(first)
	if err != nil {
		return nil, err
	}
	if err := mkdir(r.runsDir(), r.Perm); err != nil {
		return nil, err
	}
	// One creator at a time, from the check for an id in use (in any
	// letter case) to the run's appearance: two ids that differ only in
	// case must not both be made (docs/concepts.md, Identifiers).
	unlock, err := fsys.LockFile(filepath.Join(r.dir, "state", ".runs.lock"), r.Perm.File)
	if err != nil {
		return nil, err
	}
	defer unlock()
	existing, err := r.Runs(ctx)
	if err != nil {
		return nil, err
	}
	for _, id := range existing {
		if crew.SameID(id, m.ID) {
			return nil, crew.Taken("run", m.ID, id, "")
		}
	}
	line, err := events.Marshal(first)
	if err != nil {
		return nil, err
	}
	undo, err := r.CreateMailbox(m.Leader)
	if err != nil {
		return nil, err
	}
	created := false
	defer func() {
		if !created {
			undo()
		}
	}()
	if err := r.build(m, line); err != nil {
		return nil, err
	}
	created = true
	return r.Open(ctx, m.ID)
}

// build writes run m's files, its log holding line, into a hidden
// directory and renames it into place.
func (r *Store) build(m state.Manifest, line []byte) error {
	tmp, err := os.MkdirTemp(r.runsDir(), ".new-"+m.ID+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // after a successful rename, tmp no longer exists
	if err := os.Chmod(tmp, r.Perm.Dir); err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
	}{{"manifest.json", manifestFile(m)}, {"events.jsonl", line}, {"run.lock", nil}}
	for _, f := range files {
		if err := writeFileSync(filepath.Join(tmp, f.name), f.data, r.Perm.File); err != nil {
			return err
		}
	}
	if err := mkdir(filepath.Join(tmp, "mailbox"), r.Perm); err != nil {
		return err
	}
	for _, name := range mailbox.Files {
		// Empty projections (not fsynced: the log can rebuild them), so
		// that a mailbox file found missing later is known to be lost.
		if err := os.WriteFile(filepath.Join(tmp, "mailbox", name), nil, r.Perm.File); err != nil {
			return err
		}
		if err := os.Chmod(filepath.Join(tmp, "mailbox", name), r.Perm.File); err != nil {
			return err
		}
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	dir := filepath.Join(r.runsDir(), m.ID)
	if err := fsys.RenameFile(tmp, dir); err != nil {
		if errors.Is(err, os.ErrExist) || isDir(dir) {
			return crew.Taken("run", m.ID, m.ID, "")
		}
		return err
	}
	if err := syncDir(r.runsDir()); err != nil {
		os.Rename(dir, tmp) // not durable, so not created: take it back
		return err
	}
	return nil
}

// LockAgents implements store.Store: state/.agents.lock
// (docs/files.md, Locks).
func (r *Store) LockAgents() (unlock func(), err error) {
	if err := mkdir(filepath.Join(r.dir, "state"), r.Perm); err != nil {
		return nil, err
	}
	return fsys.LockFile(filepath.Join(r.dir, "state", ".agents.lock"), r.Perm.File)
}

// CreateMailbox implements store.Store. The undo function removes only
// empty directories, and only those this call made.
func (r *Store) CreateMailbox(agent string) (undo func(), err error) {
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

// Runs implements store.Store: the names in state/runs that are run ids,
// sorted: the run directories and the symbolic links that have taken the
// place of one, which Open then refuses (crew.ErrTampered), so that a run
// list shows them rather than leaving them out. Hidden names (runs being
// created) and other files are skipped.
func (r *Store) Runs(ctx context.Context) ([]string, error) {
	ents, err := os.ReadDir(r.runsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if (e.IsDir() || e.Type()&os.ModeSymlink != 0) && crew.ValidateID("run", e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// readManifest reads dir's manifest.json. One that is missing, not a
// regular file, or not the manifest of the run in dir is crew.ErrDamaged,
// saying that crew repair rebuilds it; other errors are I/O errors.
func readManifest(dir string) (state.Manifest, error) {
	var m state.Manifest
	id := filepath.Base(dir)
	damaged := func(why string) error {
		return fmt.Errorf("manifest.json of run %s %s; crew repair %s rebuilds it from the log: %w", id, why, id, crew.ErrDamaged)
	}
	f, err := fsys.OpenNoFollow(filepath.Join(dir, "manifest.json"), os.O_RDONLY, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return m, damaged("is missing")
	case errors.Is(err, crew.ErrTampered):
		return m, err
	case err != nil:
		return m, fmt.Errorf("read manifest of run %s: %w", id, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return m, fmt.Errorf("read manifest of run %s: %w", id, err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, damaged(fmt.Sprintf("does not parse (%v)", err))
	}
	if m.ID != id || crew.ValidateID("agent", m.Leader) != nil {
		return m, damaged(fmt.Sprintf("names run %q and leader %q", m.ID, m.Leader))
	}
	return m, nil
}

// manifestFile is the content of a manifest.json: m, indented, and a
// newline.
func manifestFile(m state.Manifest) []byte {
	mj, _ := json.MarshalIndent(m, "", "  ")
	return append(mj, '\n')
}

// Open implements store.Store. An unknown run is crew.ErrNotFound; a run
// directory that is a symbolic link is refused (crew.ErrTampered); a
// damaged or missing manifest.json is crew.ErrDamaged (crew repair
// rebuilds it from the log).
//
// With KeepLogs, the run's Log is opened once and kept (see KeepLogs);
// each Open still checks the run directory as above.
func (r *Store) Open(ctx context.Context, id string) (store.Log, error) {
	dir, err := r.runDir(id)
	if err != nil {
		return nil, err
	}
	if !r.KeepLogs {
		return r.open(dir)
	}
	fi, err := os.Lstat(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return r.open(dir) // the error readManifest gives
	}
	r.mu.Lock()
	k, ok := r.logs[id]
	r.mu.Unlock()
	if ok && sameVersion(k.manifest, fi) {
		return k.l, nil
	}
	l, err := r.open(dir)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.logs[id]; ok && sameVersion(k.manifest, fi) {
		return k.l, nil // opened by another goroutine meanwhile
	}
	if r.logs == nil {
		r.logs = map[string]keptLog{}
	}
	r.logs[id] = keptLog{l, fi}
	return l, nil
}

// open returns a new Log of the run in dir, reading its manifest.
func (r *Store) open(dir string) (*Log, error) {
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	return &Log{store: r, dir: dir, manifest: m}, nil
}

// runDir returns the directory of run id: crew.ErrInvalid for a bad id,
// crew.ErrNotFound for none, crew.ErrTampered for a symbolic link or a
// file that is no directory.
func (r *Store) runDir(id string) (string, error) {
	if err := crew.ValidateID("run", id); err != nil {
		return "", err
	}
	dir := filepath.Join(r.runsDir(), id)
	st, err := os.Lstat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("no run %s in %s (crew run list shows the runs): %w", id, r.dir, crew.ErrNotFound)
	case err != nil:
		return "", err
	case st.Mode()&os.ModeSymlink != 0:
		return "", fmt.Errorf("run directory %s is a symbolic link; crew does not follow links in the state root: %w", dir, crew.ErrTampered)
	case !st.IsDir():
		return "", fmt.Errorf("run %s: %s is not a directory: %w", id, dir, crew.ErrTampered)
	}
	return dir, nil
}

// OpenForRepair implements store.Repairer: it opens run id as Open
// does, except that a missing or damaged manifest.json is not an error:
// the manifest is then taken from the log's first event (run.created
// holds every field of it), and Repair writes manifest.json anew,
// keeping the damaged bytes aside. A log whose first event is not the
// run's run.created is crew.ErrDamaged: then nothing says what the run
// was.
func (r *Store) OpenForRepair(ctx context.Context, id string) (store.Log, error) {
	dir, err := r.runDir(id)
	if err != nil {
		return nil, err
	}
	m, merr := readManifest(dir)
	if merr == nil {
		return &Log{store: r, dir: dir, manifest: m}, nil
	}
	if !errors.Is(merr, crew.ErrDamaged) {
		return nil, merr
	}
	m, err = manifestFromLog(filepath.Join(dir, "events.jsonl"), id)
	if err != nil {
		return nil, fmt.Errorf("%v, and cannot be rebuilt: %w", strings.TrimSuffix(merr.Error(), ": "+crew.ErrDamaged.Error()), err)
	}
	return &Log{store: r, dir: dir, manifest: m, badManifest: merr}, nil
}

// Repair implements store.Repairer: l.Repair, for a Log of this store
// (crew.ErrInvalid for another's).
func (r *Store) Repair(ctx context.Context, l store.Log) (*store.RepairReport, error) {
	fl, ok := l.(*Log)
	if !ok || fl.store != r {
		return nil, fmt.Errorf("repair %s: not a run of %s: %w", l, r, crew.ErrInvalid)
	}
	return fl.Repair(ctx)
}

// manifestFromLog reads the manifest of run id from the run.created event
// that begins the log at path.
func manifestFromLog(path, id string) (state.Manifest, error) {
	c, err := events.Read(path, 0)
	if err != nil {
		return state.Manifest{}, err
	}
	defer c.Close()
	first, err := c.Next()
	if err != nil {
		return state.Manifest{}, fmt.Errorf("the log's first event is unreadable (%v): %w", err, crew.ErrDamaged)
	}
	m, err := store.FirstEvent(&first)
	if err != nil || m.ID != id {
		return state.Manifest{}, fmt.Errorf("the log does not begin with run %s's run.created: %w", id, crew.ErrDamaged)
	}
	return m, nil
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
