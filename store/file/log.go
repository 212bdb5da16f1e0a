package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/gofrs/flock"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/internal/jsonl"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
	"github.com/crew-dev/crew/store/commit"
)

// Log is one run's log on the file system: the directory
// .crew/state/runs/<run>/ (docs/files.md). It implements store.Log;
// Store.Repair repairs it. Its methods are safe for concurrent
// use by goroutines; any number of processes may use the same run at
// once (the run lock serialises writes).
//
// Its work is split three ways, each part with its own lock and job (the
// package doc says how they follow the lock epoch): the appender takes
// the run lock and appends (group commit), the projector writes the
// mailbox lines and mail copies, the snapshotter tasks.json and
// open.jsonl.
type Log struct {
	store       *Store
	dir         string
	manifest    state.Manifest
	badManifest error // why manifest.json was not read (OpenForRepair): Repair rewrites it

	app  appender    // the run lock and group commit (log.go, lock.go)
	proj projector   // mailbox lines and mail copies (project.go)
	snap snapshotter // tasks.json and open.jsonl (snapshot.go)
	keep keeper      // the states State returned, with Store.KeepLogs (kept.go)
}

// An appender is a Log's writer of events.jsonl: it takes the run lock
// for this process and appends the events of a batch of operations in
// one write and one fsync (Commit). Its lock is mu; turn is the writer's
// turn, held through a commit batch or a repair, so that this process
// writes the log from one goroutine at a time.
type appender struct {
	turn sync.Mutex
	mu   sync.Mutex // guards the fields below

	// The group commit: operations waiting, and whether a goroutine
	// leads (commits them).
	queue   []*op
	leading bool
	// The run lock: its users in this process (a commit batch,
	// projection jobs), and the lock while holds > 0.
	holds int
	fl    *flock.Flock
	// snapHolds are the holds of flushSnapshot, which writes only
	// tasks.json: like the projection jobs' at suspectIfLast, they do
	// not keep the lock epoch going.
	snapHolds int
	// The state as of the last commit by this process, and the log it
	// was read from.
	cache   *state.State
	cacheFI os.FileInfo
	// The events.jsonl writer commits use, kept open, and the file as
	// this process last wrote it; wStale: check it against wFI before it
	// is used again (writer).
	w      *events.Writer
	wFI    os.FileInfo
	wStale bool
}

// Manifest implements store.Log.
func (l *Log) Manifest() state.Manifest { return l.manifest }

// Dir implements store.Log: the run directory.
func (l *Log) Dir() string { return l.dir }

func (l *Log) path(name ...string) string {
	return filepath.Join(append([]string{l.dir}, name...)...)
}

// EventsPath is the path of events.jsonl.
func (l *Log) EventsPath() string { return l.path("events.jsonl") }

// String implements store.Log: the path of events.jsonl.
func (l *Log) String() string { return l.EventsPath() }

// MailboxPath is the path of a mailbox file (mailbox.InboxFile, …).
func (l *Log) MailboxPath(name string) string { return l.path("mailbox", name) }

// testHookHandOver, when set (by a test), is called when a committed
// batch's projection job is about to be handed to the projector.
var testHookHandOver func()

// An op is one change waiting to be committed, its outcome (commit.Op),
// and the projection job of its batch.
type op struct {
	commit.Op
	job  *job
	done chan struct{}
}

// Commit implements store.Log: it validates c under the run lock and
// appends its event durably, through the commit engine (store/commit).
//
// Group commit: operations from goroutines of one process queue up; one of
// them leads, takes the run lock once, has the engine validate each queued
// operation in order against the state the previous ones left, appends all
// their events in one write and one fsync, brings the projections up to
// date, and wakes them. Each still returns only after its own event is on
// disk, and, unless SetAsync, its projections are written.
//
// Write order, and why it is safe: (1) cut a torn tail, (2) load the state
// (snapshot plus the log after it), (3) validate and append the events, (4)
// fsync the log: the operations are now committed, (5) update the
// projections (mailbox files, mail tree, tasks.json). A crash before (4)
// loses only unacknowledged work; a crash after it leaves projections
// behind the log, and the next writer catches them up from the log in step
// (2) (docs/files.md, Write order).
func (l *Log) Commit(ctx context.Context, c store.Change) (*events.Event, error) {
	o := &op{Op: commit.Op{Ctx: ctx, Change: c}, done: make(chan struct{})}
	defer func() {
		if o.job != nil && !l.isAsync() {
			<-o.job.done
		}
	}()
	l.app.mu.Lock()
	l.app.queue = append(l.app.queue, o)
	if l.app.leading {
		l.app.mu.Unlock()
		<-o.done
		return o.Event, o.Err
	}
	l.app.leading = true
	for len(l.app.queue) > 0 {
		batch := l.app.queue
		l.app.queue = nil
		l.app.mu.Unlock()
		j, err := l.commitBatch(batch)
		l.app.mu.Lock()
		for _, b := range batch {
			if err != nil && b.Err == nil {
				b.Err, b.Event = err, nil
			}
			b.job = j
			if b != o {
				close(b.done)
			}
		}
	}
	l.app.leading = false
	l.app.mu.Unlock()
	return o.Event, o.Err
}

// commitBatch commits the batch under the run lock (commit.Engine over
// the Log's tail) and hands the projector the job that projects its
// events (and any events a crashed writer left unprojected), holding the
// run lock for it; it returns the job, nil when there is nothing to
// project.
//
// The job is handed over before the appender's turn is given back. A
// Repair (exclusive) takes the turn and then waits for the projector
// (Sync) before it rewrites the mailbox files: a job not yet in the
// projector's hands would escape that wait, and, projecting meanwhile
// or after, append its lines past where the projector knew the files to
// end before the batch (knownFiles, kept while the lock epoch goes on),
// that is, once more after the rebuild had written them from the log
// (TestRepairWhileBatchHandedOver). So whoever takes the turn finds
// every committed batch with the projector.
func (l *Log) commitBatch(batch []*op) (*job, error) {
	l.app.turn.Lock()
	defer l.app.turn.Unlock()
	if l.proj.isBroken() {
		// A projection failed: wait for the projector, then start again
		// from tasks.json, which is behind every event not projected.
		l.Sync()
		l.proj.mu.Lock()
		l.proj.broken = false
		l.proj.mu.Unlock()
		l.dropCache()
	}
	j, err := l.appendBatch(batch)
	if j != nil {
		if testHookHandOver != nil {
			testHookHandOver()
		}
		l.app.mu.Lock()
		alone := len(l.app.queue) == 0
		l.app.mu.Unlock()
		if !(alone && l.projectInline(j)) {
			l.enqueue(j)
		}
	}
	return j, err
}

// appendBatch is commitBatch's commit, under the run lock, which it
// gives back (the job keeps its own hold) before the job is handed
// over, so that a job left the lock's last user ends the lock epoch
// (suspectIfLast).
func (l *Log) appendBatch(batch []*op) (*job, error) {
	ctx := context.Background()
	if len(batch) == 1 {
		ctx = batch[0].Ctx // one operation (a CLI process): Ctrl-C ends its wait for the lock
	}
	if err := l.hold(ctx); err != nil {
		return nil, err
	}
	defer l.unhold()
	ops := make([]*commit.Op, len(batch))
	for i, o := range batch {
		ops[i] = &o.Op
	}
	t := &tail{l: l}
	err := commit.Engine{Run: l.manifest.ID, Fresh: true}.Commit(ctx, t, ops)
	return t.job, err
}

// tail is the Log's end for one commit batch (commit.Tail), under the
// run lock: no other process appends meanwhile, so the state it loads is
// the log's end, and its appends never conflict.
type tail struct {
	l    *Log
	w    *events.Writer // the log's writer, holding the run lock
	ld   *load
	end  int64 // the seq Load returned
	size int64 // the log's size Load found
	job  *job  // what Project made
}

// Load implements commit.Tail: the state at the end of the log, under
// the run lock (loadForWrite), with its open messages when open is set
// or open.jsonl is due.
func (t *tail) Load(ctx context.Context, open bool) (*state.State, bool, error) {
	l := t.l
	w, kept, err := l.writer()
	if err != nil {
		return nil, false, err
	}
	ld, err := l.loadForWrite(w, kept, open)
	if err != nil {
		return nil, false, err
	}
	if ld.st.Open == nil {
		if since, count := l.openSnapshotState(); openDue(ld.st.Seq, since, count) {
			// open.jsonl is due and this state cannot write it: load the
			// open messages (they then stay in the cache).
			if ld, err = l.loadForWrite(w, kept, true); err != nil {
				return nil, false, err
			}
		}
	}
	t.w, t.ld, t.end, t.size = w, ld, ld.st.Seq, w.Size()
	return ld.st, true, nil
}

// Behind implements commit.Tail: the cached state is dropped.
func (t *tail) Behind(bool) { t.l.dropCache() }

// CatchUp implements commit.Tail: view, read from the log without the
// lock, is brought up to the size Load found.
func (t *tail) CatchUp(_ context.Context, view *state.State) error {
	return t.l.catchUp(view, t.size)
}

// Append implements commit.Tail: one write and one fsync of the lines
// (events.Writer.AppendRaw). Under the run lock the log still ends where
// Load found it; a failed write drops the cached state and the writer,
// so that the next commit opens the log again, cutting what it left.
func (t *tail) Append(_ context.Context, last int64, _ []*events.Event, lines []byte) error {
	if last != t.end {
		return fmt.Errorf("append to run %s after seq %d: the log ends at seq %d: %w", t.l.manifest.ID, last, t.end, crew.ErrConflict)
	}
	if err := t.w.AppendRaw(lines); err != nil {
		t.l.dropCache()
		t.l.dropWriter()
		return err
	}
	return nil
}

// Project implements commit.Tail: it keeps st for the next commit and
// makes the job that projects the committed events and the events the
// load replayed (a writer may have crashed before projecting them),
// taking a hold of the run lock for it. Projections are best effort
// from here: a failure leaves them behind the log, and the next writer
// catches up.
func (t *tail) Project(_ context.Context, st *state.State, evs []*events.Event, acts []mailbox.Act) {
	l, ld := t.l, t.ld
	// The waiters of the events are poked first, the events replayed
	// (their writer may have crashed before poking) with them.
	l.notify(ld.caughtUp)
	l.notify(evs)
	if len(evs) > 0 {
		st.Offset = t.w.Size()
	}
	l.keepCache(st)
	caughtUp := append(ld.caughtUp, evs...)
	if len(caughtUp) == 0 {
		return
	}
	j := &job{evs: caughtUp, acts: append(ld.acts, acts...), before: ld.before, snap: st.ShareTasks(), done: make(chan struct{})}
	// The same rule as in Load (the count open.jsonl was written with),
	// so that open messages loaded because it was due are written out.
	if since, count := l.openSnapshotState(); st.Whole() && openDue(st.Seq, since, count) {
		j.open = st.Copy()
		l.noteOpenSnapshot(st.Seq, int64(len(st.Open))) // written by the job; not due again meanwhile
	}
	l.hold(context.Background()) // the job's: it cannot fail, the lock is held
	t.job = j
}

// ioFailure reports whether err holds an error of the OS (no space, an I/O
// error, a read-only file system), as opposed to a refusal such as a
// symbolic link crew does not write through, which trying again would not
// cure.
func ioFailure(err error) bool {
	var (
		pe    *fs.PathError
		le    *os.LinkError
		errno syscall.Errno
	)
	return errors.As(err, &pe) || errors.As(err, &le) || errors.As(err, &errno)
}

// catchUp brings side, a state read from the log without the lock, up to
// the log's end (size, under the lock).
func (l *Log) catchUp(side *state.State, size int64) error {
	f, err := fsys.OpenNoFollow(l.EventsPath(), os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	line, ok, err := jsonl.LineBefore(f, side.Offset)
	f.Close()
	if err != nil {
		return err
	}
	if seq, _ := jsonl.SeqOf(line.Data); !ok || side.Offset > size || seq != side.Seq {
		return fmt.Errorf("the log of run %s changed while it was read (repaired?); read again: %w", l.manifest.ID, crew.ErrConflict)
	}
	_, err = l.replay(side, size, 0, nil)
	return err
}

func (l *Log) dropCache() {
	l.app.mu.Lock()
	l.app.cache, l.app.cacheFI = nil, nil
	l.app.mu.Unlock()
}

// keepCache keeps st, the state as of the end of the log this process
// just wrote, for its next commit, and notes the log as it is now for
// the kept writer (writer).
func (l *Log) keepCache(st *state.State) {
	fi, err := os.Lstat(l.EventsPath())
	a := &l.app
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.cache, a.cacheFI = nil, nil
	} else {
		a.cache, a.cacheFI = st, fi
	}
	a.wFI = fi // nil on error: the writer is opened again
}

// A load is what a writer finds under the run lock: the state at the
// end of the log, and what projections may still owe the log.
type load struct {
	st *state.State
	// caughtUp are the events the load replayed after the seq the
	// projection mark (or tasks.json) says projections got to: their
	// projections may be missing (a writer may have crashed after its
	// fsync); acts are what they ask of the mail tree.
	caughtUp []*events.Event
	acts     []mailbox.Act
	// before is the mark's (or tasks.json's) State.Files: where the
	// mailbox files stood before caughtUp.
	before map[string]int64
}

// loadForWrite loads the state as of the end of the log, under the run
// lock, with its open messages when needOpen: this process's own state
// when no other process has appended since, else tasks.json (or
// open.jsonl) and the log after it. kept says w is the writer this
// process kept, the log unchanged since it last wrote it (Log.writer).
func (l *Log) loadForWrite(w *events.Writer, kept, needOpen bool) (*load, error) {
	l.app.mu.Lock()
	st, fi := l.app.cache, l.app.cacheFI
	l.app.mu.Unlock()
	if st != nil {
		// Our own state is current unless another process appended since,
		// or the log was replaced (repair): then replay only what is new.
		same := kept // checked already
		if !same {
			cur, err := os.Stat(l.EventsPath())
			same = err == nil && os.SameFile(cur, fi)
		}
		if !same || st.Offset > w.Size() || (needOpen && st.Open == nil) {
			st = nil
		} else if st.Offset == w.Size() {
			return &load{st: st, before: maps.Clone(st.Files)}, nil
		}
	}
	if _, ok, err := w.Last(); err != nil {
		return nil, fmt.Errorf("%w; run crew repair %s", err, l.manifest.ID)
	} else if !ok {
		return nil, fmt.Errorf("run %s has an empty log; run crew repair %s: %w", l.manifest.ID, l.manifest.ID, crew.ErrDamaged)
	}
	ld := &load{st: st}
	var projected int64 // seq up to which projections are known to be done
	if st != nil {
		ld.before, projected = maps.Clone(st.Files), st.Seq
		// Another process appended since: its projections are done as
		// far as the projection mark (or tasks.json) it wrote before
		// letting the lock go says, which a new Log would start from;
		// the events up to there are not projected again. A usable mark
		// spares the decode of tasks.json: it is written with it, and
		// is never behind it but after a crash between the two, or
		// where a crew older than the mark wrote tasks.json (those
		// events are then projected again, idempotently).
		if m, ok := l.readMark(); ok {
			if m.Seq > projected {
				ld.before, projected = m.Files, m.Seq
			}
		} else if snap := l.readSnapshot(); snap.Seq > projected {
			ld.before, projected = maps.Clone(snap.Files), snap.Seq
		}
	} else {
		// The projection mark, or tasks.json, says how far projections
		// got: wait for this process's own jobs, so that it says so for
		// them too (else their events would be projected twice).
		l.Sync()
		snap := l.readSnapshot()
		l.noteRead(snap.Seq)
		ld.before, projected = maps.Clone(snap.Files), snap.Seq
		if m, ok := l.readMark(); ok && m.Seq > projected {
			ld.before, projected = m.Files, m.Seq
		}
		ld.st = snap
		if needOpen {
			if ld.st = l.readOpenSnapshot(state.New()); ld.st.Seq > projected {
				ld.st = state.New() // an open.jsonl ahead of the projections: the log from its start
			}
		}
	}
	var err error
	ld.caughtUp, err = l.replay(ld.st, w.Size(), projected, &ld.acts)
	return ld, err
}

// replay folds the log from st.Offset up to size into st. Damaged lines are
// skipped and remembered in st.Damage (readers then exit 7). When acts is
// not nil, the events after seq from are returned, and what they ask of
// the mail tree appended to acts.
func (l *Log) replay(st *state.State, size int64, from int64, acts *[]mailbox.Act) ([]*events.Event, error) {
	if st.Offset >= size {
		return nil, nil
	}
	c, err := events.ReadAt(l.EventsPath(), st.Offset, st.Seq+1)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var out []*events.Event
	for c.Offset() < size {
		e, err := c.Next()
		if err == io.EOF {
			break
		}
		var de *events.DamageError
		if errors.As(err, &de) {
			st.Damage = append(st.Damage, de.Error())
			if e.Seq == 0 {
				continue
			}
		} else if err != nil {
			return nil, err
		}
		effects, err := st.Apply(&e)
		if err != nil {
			st.Damage = append(st.Damage, err.Error())
			continue
		}
		if acts != nil && e.Seq > from {
			*acts = mailbox.AppendActs(*acts, effects, false)
			ev := e
			out = append(out, &ev)
		}
	}
	st.Offset = c.Offset()
	return out, nil
}

// State implements store.Log, without the run lock: a snapshot plus the
// log after it, up to the log's last complete line. A state that tracks
// tasks only starts from tasks.json, which stays small however many
// messages are open; one that tracks open messages from open.jsonl
// (docs/files.md, Snapshots). A Log kept by a long-lived process
// (Store.KeepLogs) starts from the state of the same kind it returned
// last, reading only what was appended since (keeper, kept.go). The
// state is the caller's: it may change it.
func (l *Log) State(ctx context.Context, empty *state.State) (*state.State, error) {
	if l.store.KeepLogs {
		return l.keptState(empty)
	}
	return l.readState(empty)
}

// readState is State from a snapshot.
func (l *Log) readState(empty *state.State) (*state.State, error) {
	var st *state.State
	if empty.Open == nil {
		st = l.readSnapshot()
	} else {
		st = l.readOpenSnapshot(empty)
	}
	fi, err := os.Stat(l.EventsPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("run %s has lost its event log %s; crew repair %s starts a new one from the manifest: %w", l.manifest.ID, l.EventsPath(), l.manifest.ID, crew.ErrDamaged)
	}
	if err != nil {
		return nil, err
	}
	complete, err := completeSize(l.EventsPath(), fi.Size())
	if err != nil {
		return nil, err
	}
	if st.Offset > complete {
		st = st.Fresh()
	}
	if _, err := l.replay(st, complete, 0, nil); err != nil {
		return nil, err
	}
	if st.Seq == 0 {
		st.Damage = append(st.Damage, l.EventsPath()+" holds no events, not even run.created")
	}
	return st, nil
}

func completeSize(path string, _ int64) (int64, error) {
	f, err := fsys.OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	c, _, err := jsonl.CompleteSize(f)
	return c, err
}
