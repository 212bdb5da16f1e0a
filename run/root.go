package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
	"github.com/crew-dev/crew/store/file"
)

// DirName is the name of the state root directory, found like git finds
// .git.
const DirName = file.DirName

// Root is a state root: where runs and the per-agent mail tree live, in
// a store chosen when the root is made: Init and Find make one on the
// file system (store/file), NewRoot one on any store.Store (store/nats:
// NATS JetStream). The runs it opens have the same operations whichever
// store holds them.
type Root struct {
	Store   store.Store
	MaxBody int // largest message body in bytes; 0 means DefaultMaxBody
	perm    crew.Perm
}

// NewRoot returns a root whose runs and mail tree live in s. The files
// its runs' workers leave on this machine (Run.WorkersDir) get
// crew.PrivatePerm's modes; Init and Find give theirs.
func NewRoot(s store.Store) *Root { return &Root{Store: s, perm: crew.PrivatePerm} }

// Perm returns the modes of the files the root's runs leave on this
// machine outside the store (Run.WorkersDir): the perm given to Init or
// Find, crew.PrivatePerm for a root made by NewRoot.
func (r *Root) Perm() crew.Perm {
	if r.perm == (crew.Perm{}) {
		return crew.PrivatePerm
	}
	return r.perm
}

// Init creates a state root at dir/.crew (or dir itself when it is named
// .crew) on the file system and returns it. Initialising an existing root
// is not an error.
func Init(dir string, perm crew.Perm) (*Root, error) {
	s, err := file.Init(dir, perm)
	if err != nil {
		return nil, err
	}
	return &Root{Store: s, perm: perm}, nil
}

// Find returns the state root for dir: dir itself if it is a .crew
// directory or holds one, else the nearest ancestor that holds one. No
// state root is crew.ErrNotFound, with a hint to run crew init.
func Find(dir string, perm crew.Perm) (*Root, error) {
	s, err := file.Find(dir, perm)
	if err != nil {
		return nil, err
	}
	return &Root{Store: s, perm: perm}, nil
}

// FindKept is Find for a process whose operations follow one another on
// the same runs (a command line, crew mcp, crew serve): the store keeps
// one Log per run for its life (file.Store.KeepLogs, as NATS's
// Options.KeepLogs), so that each operation starts from the state the
// last one left.
func FindKept(dir string, perm crew.Perm) (*Root, error) {
	s, err := file.Find(dir, perm)
	if err != nil {
		return nil, err
	}
	s.KeepLogs = true
	return &Root{Store: s, perm: perm}, nil
}

// Above returns the state root that one made by Init(dir) would shadow:
// the directory of the nearest .crew above dir's (Find, started from
// there, would find it; from dir and below, it finds the new one). It
// returns "" when there is none.
func Above(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	if filepath.Base(abs) == DirName {
		abs = filepath.Dir(abs)
	}
	if filepath.Dir(abs) == abs {
		return ""
	}
	s, err := file.Find(filepath.Dir(abs), crew.PrivatePerm)
	if err != nil {
		return ""
	}
	return s.Dir()
}

// Close releases the root's store: on the file system it waits for the
// projections its runs still write after their operations returned
// (file.Store.Close), on NATS it closes the connection. Call it before
// the process ends.
func (r *Root) Close() error {
	if c, ok := r.Store.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Dir returns the state root's directory, "" for a store without one.
func (r *Root) Dir() string { return r.Store.Dir() }

// String names the root in messages: its directory, or its store
// ("nats://10.0.0.5:4222", without credentials).
func (r *Root) String() string { return r.Store.String() }

// Mail returns the root's per-agent mail tree.
func (r *Root) Mail() mailbox.Store { return r.Store.Mail() }

// DefaultMaxBody is the default body limit (docs/files.md, Body limit):
// 1 MiB.
const DefaultMaxBody = 1 << 20

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

// Create makes a new run: its log begins with a run.created event that
// holds its manifest, and its leader gets a mailbox. A run either exists
// whole or not at all. An id already in use (in any letter case) is
// crew.ErrConflict; a bad id or leader, or a title that is not UTF-8 or
// not one line, crew.ErrInvalid.
func (r *Root) Create(opts CreateOptions) (*Run, error) {
	now := events.Now()
	if opts.ID == "" {
		opts.ID = NewRunID(now.Time)
	}
	if opts.Leader == "" {
		opts.Leader = Leader
	}
	if err := crew.ValidateID("run", opts.ID); err != nil {
		return nil, err
	}
	if err := crew.ValidateID("agent", opts.Leader); err != nil {
		return nil, err
	}
	if err := checkTitle("run", opts.Title); err != nil {
		return nil, err
	}
	unlock, err := r.lockAgents()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := r.taskAgentNamed(opts.Leader); err != nil {
		return nil, err
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
	first := &events.Event{Seq: 1, At: now, Type: events.RunCreated, Run: m.ID, Actor: m.Leader, Data: data}
	l, err := r.Store.Create(context.Background(), first)
	if err != nil {
		return nil, err
	}
	return r.newRun(l), nil
}

// Open opens an existing run. An unknown run is crew.ErrNotFound; a bad
// id crew.ErrInvalid.
func (r *Root) Open(id string) (*Run, error) {
	if err := crew.ValidateID("run", id); err != nil {
		return nil, err
	}
	l, err := r.Store.Open(context.Background(), id)
	if err != nil {
		return nil, r.nearRun(id, err)
	}
	return r.newRun(l), nil
}

// nearRun adds to err, when it is run id's crew.ErrNotFound and the root
// holds a run id most likely meant (crew.NearID: a case variant, a near
// name), a did-you-mean.
func (r *Root) nearRun(id string, err error) error {
	if !errors.Is(err, crew.ErrNotFound) {
		return err
	}
	ids, lerr := r.Store.Runs(context.Background())
	if lerr != nil {
		return err
	}
	if near := crew.NearID(id, ids); near != "" {
		return fmt.Errorf("no run %s in %s (did you mean %s?): %w", id, r, near, crew.ErrNotFound)
	}
	return err
}

// OpenForRepair opens run id for Run.Repair: as Open does, except that
// a run whose own files Open refuses as damaged (on the file store a
// missing or garbled manifest.json, which the log's first event can
// rebuild: store.Repairer) is opened too, for Repair to mend.
func (r *Root) OpenForRepair(id string) (*Run, error) {
	rr, ok := r.Store.(store.Repairer)
	if !ok {
		return r.Open(id)
	}
	if err := crew.ValidateID("run", id); err != nil {
		return nil, err
	}
	l, err := rr.OpenForRepair(context.Background(), id)
	if err != nil {
		return nil, err
	}
	return r.newRun(l), nil
}

// List returns the manifests of all runs, oldest first. A run that
// cannot be opened (its manifest unreadable, its directory a link) is
// returned in bad, as a *BadRun, oldest first as far as known.
func (r *Root) List() (runs []state.Manifest, bad []error, err error) {
	ids, err := r.Store.Runs(context.Background())
	if err != nil {
		return nil, nil, err
	}
	var broken []*BadRun
	for _, id := range ids {
		l, err := r.Store.Open(context.Background(), id)
		if err != nil {
			broken = append(broken, r.badRun(id, err))
			continue
		}
		runs = append(runs, l.Manifest())
	}
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].CreatedAt.Before(runs[j].CreatedAt.Time) })
	sort.SliceStable(broken, func(i, j int) bool { return broken[i].CreatedAt.Before(broken[j].CreatedAt.Time) })
	for _, b := range broken {
		bad = append(bad, b)
	}
	return runs, bad, nil
}

// A BadRun is a run that List could not open: its id, its creation time
// when its log still says it (zero otherwise), and why.
type BadRun struct {
	ID        string
	CreatedAt events.Time
	Err       error
}

func (b *BadRun) Error() string { return b.Err.Error() }
func (b *BadRun) Unwrap() error { return b.Err }

// badRun makes the BadRun of run id, which Open refused with err, with
// the creation time OpenForRepair can still find.
func (r *Root) badRun(id string, err error) *BadRun {
	b := &BadRun{ID: id, Err: err}
	if rr, ok := r.Store.(store.Repairer); ok {
		if l, rerr := rr.OpenForRepair(context.Background(), id); rerr == nil {
			b.CreatedAt = l.Manifest().CreatedAt
		}
	}
	return b
}

// Latest returns the most recently created run, for commands given no
// run, and how many runs the root holds that open (a front end says
// which run it took when there are others). A run that cannot be opened and is newer than every other, or
// whose age is unknown, is an error saying what is wrong with it (with
// its class: crew.ErrDamaged, crew.ErrTampered, ...): another run is not
// silently taken in its place. No run at all is crew.ErrNotFound.
func (r *Root) Latest() (*Run, int, error) {
	runs, bad, err := r.List()
	if err != nil {
		return nil, 0, err
	}
	var newest events.Time
	if len(runs) > 0 {
		newest = runs[len(runs)-1].CreatedAt
	}
	for i := len(bad) - 1; i >= 0; i-- { // newest first
		b := bad[i].(*BadRun)
		if len(runs) == 0 || b.CreatedAt.IsZero() || b.CreatedAt.After(newest.Time) {
			return nil, 0, fmt.Errorf("the latest run cannot be opened (give --run to use another): %w", b)
		}
	}
	if len(runs) == 0 {
		return nil, 0, fmt.Errorf("no runs yet; create one with crew run create: %w", crew.ErrNotFound)
	}
	rn, err := r.Open(runs[len(runs)-1].ID)
	return rn, len(runs), err
}
