package run

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/gofrs/flock"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/internal/jsonl"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
)

// Run is one coordinated job: a directory .crew/state/runs/<run>/. Its
// methods are safe for concurrent use by goroutines; any number of
// processes may use the same run at once (the run lock serialises writes).
type Run struct {
	Manifest state.Manifest
	root     *Root
	dir      string

	mu      sync.Mutex // guards queue, leading and cache
	queue   []*op
	leading bool
	cache   *state.State // state as of the last commit by this process
	cacheFI os.FileInfo  // identity of the log the cache was read from

	wmu   sync.Mutex   // one writer of the log (a commit batch, repair) at a time in this process
	hmu   sync.Mutex   // guards holds, fl and held
	holds int          // users of the run lock in this process: a commit batch, projection jobs
	fl    *flock.Flock // the run lock, while holds > 0
	held  lockEpoch    // what this process knows of the run's files while it holds the lock
	proj  projector
	// open.jsonl as this process last read or wrote it (openSnapshotState)
	openSeq, openCount atomic.Int64
	openKnown          atomic.Bool

	remote *remoteLog // set: the run lives in a RemoteStore (NATS), not in dir (see remote.go)
}

// ID returns the run id.
func (r *Run) ID() string { return r.Manifest.ID }

// Dir returns the run directory ("" for a run in a RemoteStore).
func (r *Run) Dir() string { return r.dir }

// Root returns the state root the run lives in.
func (r *Run) Root() *Root { return r.root }

func (r *Run) path(name ...string) string {
	return filepath.Join(append([]string{r.dir}, name...)...)
}

// EventsPath is the path of events.jsonl.
func (r *Run) EventsPath() string { return r.path("events.jsonl") }

// MailboxPath is the path of a mailbox file (mailbox.InboxFile, …).
func (r *Run) MailboxPath(name string) string { return r.path("mailbox", name) }

// An op is one operation waiting to be committed. fn sees the current state
// (including the effects of operations committed before it in the same
// batch) and returns the event to append, without seq, time or run; nil
// means nothing to write.
type op struct {
	ctx      context.Context // a cancelled operation is not committed
	fn       func(*state.State) (*events.Event, error)
	needOpen bool         // fn reads State.Open: load the open messages
	side     *state.State // when set, fn validates against this state (read by the caller, brought up to date here) instead
	ev       *events.Event
	err      error
	job      *job // the projection of its batch
	done     chan struct{}
}

// commit runs fn under the run lock and appends its event durably.
//
// Group commit: operations from goroutines of one process queue up; one of
// them leads, takes the run lock once, validates each queued operation in
// order against the state the previous ones left, appends all their events
// in one write and one fsync, brings the projections up to date, and wakes
// them. Each still returns only after its own event is on disk.
//
// Write order, and why it is safe: (1) cut a torn tail, (2) load the state
// (snapshot plus the log after it), (3) validate and append the events, (4)
// fsync the log: the operations are now committed, (5) update the
// projections (mailbox files, mail tree, tasks.json). A crash before (4)
// loses only unacknowledged work; a crash after it leaves projections
// behind the log, and the next writer catches them up from the log in step
// (2).
func (r *Run) commit(ctx context.Context, fn func(*state.State) (*events.Event, error)) (*events.Event, error) {
	return r.commitOp(&op{ctx: ctx, fn: fn, done: make(chan struct{})})
}

// commitOpen is commit for an fn that reads State.Open.
func (r *Run) commitOpen(ctx context.Context, fn func(*state.State) (*events.Event, error)) (*events.Event, error) {
	return r.commitOp(&op{ctx: ctx, fn: fn, needOpen: true, done: make(chan struct{})})
}

// commitOp queues o and returns when its event is durable and, unless the
// Run is asynchronous, projected.
func (r *Run) commitOp(o *op) (*events.Event, error) {
	if r.remote != nil { // a RemoteStore: optimistic commit (remote.go)
		return r.remote.commit(o)
	}
	defer func() {
		if o.job != nil && !r.isAsync() {
			<-o.job.done
		}
	}()
	r.mu.Lock()
	r.queue = append(r.queue, o)
	if r.leading {
		r.mu.Unlock()
		<-o.done
		return o.ev, o.err
	}
	r.leading = true
	for len(r.queue) > 0 {
		batch := r.queue
		r.queue = nil
		r.mu.Unlock()
		j, err := r.commitBatch(batch)
		if j != nil {
			r.mu.Lock()
			alone := len(r.queue) == 0
			r.mu.Unlock()
			if !(alone && r.projectInline(j)) {
				r.enqueue(j)
			}
		}
		r.mu.Lock()
		for _, b := range batch {
			if err != nil && b.err == nil {
				b.err, b.ev = err, nil
			}
			b.job = j
			if b != o {
				close(b.done)
			}
		}
	}
	r.leading = false
	r.mu.Unlock()
	return o.ev, o.err
}

// lock takes the run lock (gofrs/flock on run.lock), waiting until ctx is
// done. run.lock must be a regular file: flock opens it with O_CREATE, so a
// link would be followed.
func (r *Run) lock(ctx context.Context) (*flock.Flock, error) {
	if fi, err := os.Lstat(r.path("run.lock")); err == nil && !fi.Mode().IsRegular() {
		// flock opens with O_CREATE: a link would be followed.
		return nil, fmt.Errorf("lock run %s: %s: %w", r.ID(), r.path("run.lock"), fsys.ErrLink)
	}
	fl := flock.New(r.path("run.lock"))
	if ok, err := fl.TryLock(); err != nil {
		return nil, fmt.Errorf("lock run %s: %w", r.ID(), err)
	} else if ok {
		return fl, nil
	}
	// Another process holds it: wait in flock(2), in a goroutine, so that
	// ctx (Ctrl-C) can end the wait.
	got := make(chan error, 1)
	go func() { got <- fl.Lock() }()
	select {
	case err := <-got:
		if err != nil {
			return nil, fmt.Errorf("lock run %s: %w", r.ID(), err)
		}
		return fl, nil
	case <-ctx.Done():
		go func() {
			if <-got == nil {
				fl.Unlock() // taken after all: give it back
			}
		}()
		return nil, ctx.Err()
	}
}

// commitBatch validates and appends the batch's events under the run lock
// and returns the job that projects them (and any events a crashed writer
// left unprojected), holding the run lock for it; nil when there is
// nothing to project.
func (r *Run) commitBatch(batch []*op) (*job, error) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.proj.isBroken() {
		// A projection failed: wait for the projector, then start again
		// from tasks.json, which is behind every event not projected.
		r.Sync()
		r.proj.mu.Lock()
		r.proj.broken = false
		r.proj.mu.Unlock()
		r.dropCache()
	}
	ctx := context.Background()
	if len(batch) == 1 && batch[0].ctx != nil {
		ctx = batch[0].ctx // one operation (a CLI process): Ctrl-C ends its wait for the lock
	}
	if err := r.hold(ctx); err != nil {
		return nil, err
	}
	defer r.unhold()
	w, err := events.OpenWriter(r.EventsPath())
	if err != nil {
		return nil, err
	}
	defer w.Close()
	needOpen := false
	for _, o := range batch {
		needOpen = needOpen || o.needOpen
	}
	st, caughtUp, acts, before, err := r.loadForWrite(w, needOpen)
	if err != nil {
		return nil, err
	}
	if st.Open == nil {
		if since, count := r.openSnapshotState(); openDue(st.Seq, since, count) {
			// open.jsonl is due and this state cannot write it: load the
			// open messages (they then stay in the cache).
			if st, caughtUp, acts, before, err = r.loadForWrite(w, true); err != nil {
				return nil, err
			}
		}
	}
	var (
		buf []byte
		evs []*events.Event
	)
	for _, o := range batch {
		target := st
		if o.side != nil {
			if err := r.catchUp(o.side, w.Size(), evs); err != nil {
				o.err = err
				continue
			}
			target = o.side
		}
		if o.ctx != nil && o.ctx.Err() != nil {
			// Cancelled (Ctrl-C) while waiting for the lock: the user
			// was told nothing was done, so nothing is.
			o.err = o.ctx.Err()
			continue
		}
		ev, err := o.fn(target)
		if err != nil {
			o.err = err
			continue
		}
		if ev == nil {
			continue
		}
		ev.Seq = st.Seq + 1
		ev.Run = r.ID()
		if ev.At.IsZero() {
			ev.At = events.Now()
		}
		if m := ev.Message; m != nil {
			m.Seq, m.Run, m.SentAt, m.Status = ev.Seq, r.ID(), ev.At, events.StatusPending
		}
		line, err := events.Marshal(ev)
		if err != nil {
			o.err = err
			continue
		}
		seq := st.Seq
		effects, err := st.Apply(ev)
		if err != nil {
			o.err = err
			st.Seq = seq // the seq stays free: no gap
			continue
		}
		if o.side != nil && o.side != st {
			side, _ := o.side.Apply(ev)
			effects = knownCopies(effects, side)
		}
		acts = appendActs(acts, effects, true) // the batch's own: fresh messages
		buf = append(buf, line...)
		evs = append(evs, ev)
		o.ev = ev
	}
	if len(buf) > 0 {
		if err := w.AppendRaw(buf); err != nil {
			r.dropCache()
			return nil, err
		}
		st.Offset = w.Size()
	}
	r.keepCache(st, w)
	// Committed. Projections are best effort from here: a failure leaves
	// them behind the log, and the next writer catches up.
	caughtUp = append(caughtUp, evs...)
	if len(caughtUp) == 0 {
		return nil, nil
	}
	j := &job{evs: caughtUp, acts: acts, before: before, snap: st.CopyTasks(), done: make(chan struct{})}
	// The same rule as above (the count open.jsonl was written with), so
	// that open messages loaded because it was due are written out.
	if since, count := r.openSnapshotState(); st.Whole() && openDue(st.Seq, since, count) {
		j.open = st.Copy()
		r.noteOpenSnapshot(st.Seq, int64(len(st.Open))) // written by the job; not due again meanwhile
	}
	r.hold(context.Background()) // the job's: it cannot fail, the lock is held
	return j, nil
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
// the log's end (size, under the lock) and the batch's events before the
// caller's (evs, not yet written).
func (r *Run) catchUp(side *state.State, size int64, evs []*events.Event) error {
	f, err := os.Open(r.EventsPath())
	if err != nil {
		return err
	}
	l, ok, err := jsonl.LineBefore(f, side.Offset)
	f.Close()
	if err != nil {
		return err
	}
	if seq, _ := jsonl.SeqOf(l.Data); !ok || side.Offset > size || seq != side.Seq {
		return fmt.Errorf("the log of run %s changed while it was read (repaired?); read again: %w", r.ID(), crew.ErrConflict)
	}
	if _, err := r.replay(side, size, 0, nil); err != nil {
		return err
	}
	for _, e := range evs {
		side.Apply(e)
	}
	return nil
}

func (r *Run) dropCache() {
	r.mu.Lock()
	r.cache, r.cacheFI = nil, nil
	r.mu.Unlock()
}

func (r *Run) keepCache(st *state.State, w *events.Writer) {
	fi, err := os.Stat(r.EventsPath())
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.cache, r.cacheFI = nil, nil
		return
	}
	r.cache, r.cacheFI = st, fi
}

// loadForWrite returns the state as of the end of the log, under the run
// lock, with its open messages when needOpen; the events after
// tasks.json's seq that it replayed (their projections may be missing: a
// writer may have crashed after its fsync) and what they ask of the mail
// tree; and tasks.json's State.Files: where the mailbox files stood
// before those events.
func (r *Run) loadForWrite(w *events.Writer, needOpen bool) (*state.State, []*events.Event, []treeAct, map[string]int64, error) {
	r.mu.Lock()
	st, fi := r.cache, r.cacheFI
	r.mu.Unlock()
	if st != nil {
		// Our own state is current unless another process appended since,
		// or the log was replaced (repair): then replay only what is new.
		cur, err := os.Stat(r.EventsPath())
		if err != nil || !os.SameFile(cur, fi) || st.Offset > w.Size() || (needOpen && st.Open == nil) {
			st = nil
		} else if st.Offset == w.Size() {
			return st, nil, nil, maps.Clone(st.Files), nil
		}
	}
	if _, ok, err := w.Last(); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%w; run crew repair %s", err, r.ID())
	} else if !ok {
		return nil, nil, nil, nil, fmt.Errorf("run %s has an empty log; run crew repair %s: %w", r.ID(), r.ID(), crew.ErrDamaged)
	}
	var (
		before    map[string]int64
		projected int64 // seq up to which projections are known to be done
	)
	if st != nil {
		before, projected = maps.Clone(st.Files), st.Seq
	} else {
		// tasks.json says how far projections got: wait for this
		// process's own jobs, so that it says so for them too (else
		// their events would be projected twice).
		r.Sync()
		snap := r.readSnapshot()
		before, projected = maps.Clone(snap.Files), snap.Seq
		st = snap
		if needOpen {
			if st = r.readOpenSnapshot(state.New()); st.Seq > projected {
				st = state.New() // an open.jsonl ahead of tasks.json: the log from its start
			}
		}
	}
	var acts []treeAct
	evs, err := r.replay(st, w.Size(), projected, &acts)
	return st, evs, acts, before, err
}

// replay folds the log from st.Offset up to size into st. Damaged lines are
// skipped and remembered in st.Damage (readers then exit 7). When acts is
// not nil, the events after seq from are returned, and what they ask of
// the mail tree appended to acts.
func (r *Run) replay(st *state.State, size int64, from int64, acts *[]treeAct) ([]*events.Event, error) {
	if st.Offset >= size {
		return nil, nil
	}
	c, err := events.ReadAt(r.EventsPath(), st.Offset, st.Seq+1)
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
			*acts = appendActs(*acts, effects, false)
			ev := e
			out = append(out, &ev)
		}
	}
	st.Offset = c.Offset()
	return out, nil
}

// readSnapshot returns the state in tasks.json when it matches the log
// (the line just before its offset has its seq), else an empty state: a
// missing, stale-beyond-the-log or corrupt snapshot is rebuilt from the log
// without user action. The state has its tasks only (State.Open is nil).
func (r *Run) readSnapshot() *state.State {
	empty := state.NewTasks()
	for range 3 { // a snapshot read while it was rewritten is read again
		data, err := readSnapshotFile(r.path("tasks.json"))
		if err != nil {
			return empty
		}
		obj, whole := openJSON(data)
		if !whole {
			continue
		}
		st := &state.State{}
		if json.Unmarshal(obj, st) != nil || !r.matchesLog(st) {
			return empty
		}
		return st
	}
	return empty
}

// writeSnapshot replaces tasks.json atomically, keeping inodes
// (rewriteKeepingInodes: it is rewritten after every burst of commits),
// sealed with its checksum (sealJSON). It is a projection, so it is not
// fsynced: a lost snapshot is rebuilt from the log.
func (r *Run) writeSnapshot(st *state.State) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return rewriteKeepingInodes(r.path("tasks.json"), r.root.Perm.File, func(w io.Writer) error {
		_, err := w.Write(sealJSON(data))
		return err
	})
}

// State returns the run's current state, read without the run lock: its
// tasks and its open messages (open.jsonl plus the log after it). Damage
// met on the way is listed in State.Damage.
func (r *Run) State() (*state.State, error) {
	return r.read(func() *state.State { return r.readOpenSnapshot(state.New()) })
}

// TaskState is State without the open messages (State.Open is nil): the
// tasks only, read from tasks.json plus the log after it, which stays
// small however many messages are open.
func (r *Run) TaskState() (*state.State, error) {
	return r.read(r.readSnapshot)
}

// stateFor is State with the open messages of one participant only (a
// task id, or Leader).
func (r *Run) stateFor(participant string) (*state.State, error) {
	return r.read(func() *state.State { return r.readOpenSnapshot(state.For(participant)) })
}

// read returns the state from a snapshot plus the log after it, up to the
// log's last complete line.
func (r *Run) read(snapshot func() *state.State) (*state.State, error) {
	if r.remote != nil { // a RemoteStore: the state this process reduced from the log (remote.go)
		return r.remote.snapshot(context.Background())
	}
	st := snapshot()
	fi, err := os.Stat(r.EventsPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("run %s has lost its event log %s; crew repair %s starts a new one from the manifest: %w", r.ID(), r.EventsPath(), r.ID(), crew.ErrDamaged)
	}
	if err != nil {
		return nil, err
	}
	complete, err := completeSize(r.EventsPath(), fi.Size())
	if err != nil {
		return nil, err
	}
	if st.Offset > complete {
		st = st.Fresh()
	}
	if _, err := r.replay(st, complete, 0, nil); err != nil {
		return nil, err
	}
	if st.Seq == 0 {
		st.Damage = append(st.Damage, r.EventsPath()+" holds no events, not even run.created")
	}
	return st, nil
}

func completeSize(path string, _ int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	c, _, err := jsonl.CompleteSize(f)
	return c, err
}

// project brings the projections up to date with events already committed:
// mailbox files, the mail tree, and the read flags in it. evs are the log's
// last events (those after the snapshot the writer loaded, then its own);
// before is State.Files as of the snapshot. Every step is idempotent (a
// mailbox line is appended only past the file's last seq; a mail file keeps
// its name), so replaying an event twice is harmless.
//
// Each mailbox file must end with the message st.Files names. One that ends
// between before and that is behind by some of evs, which are appended; one
// that is missing, damaged at its end, ahead of the log, or behind by more
// than evs hold (a line lost in a crash while tasks.json survived) is
// rebuilt from the log. Where each file ends is read from it, unless this
// process projected last and has kept the lock since (lockEpoch).
func (r *Run) project(acts []treeAct, evs []*events.Event, files, before map[string]int64) error {
	lines := map[string][]events.Message{}
	for _, e := range evs {
		if m := e.Message; m != nil {
			lines[mailbox.FileFor(m)] = append(lines[mailbox.FileFor(m)], *m)
		}
	}
	treeErr := r.projectTree(acts)
	known := r.knownFiles() // nil unless this process projected last, keeping the lock since
	if known == nil {
		if err := mkdir(r.path("mailbox"), r.root.Perm); err != nil {
			return errors.Join(treeErr, err) // e.g. a symbolic link: not written through
		}
	}
	var errs []error
	for _, file := range mailbox.Files {
		key := strings.TrimSuffix(file, ".jsonl")
		want := files[key]
		have, ok := known[key]
		var err, serr error
		if !ok && known == nil {
			have, err = mailbox.LastSeq(r.MailboxPath(file))
			_, serr = os.Lstat(r.MailboxPath(file))
		}
		switch {
		case err == nil && serr == nil && have == want:
			// up to date
		case err == nil && serr == nil && have >= before[key] && have < want:
			var add []events.Message
			for _, m := range lines[file] {
				if m.Seq > have {
					add = append(add, m)
				}
			}
			errs = append(errs, mailbox.Append(r.MailboxPath(file), r.root.Perm.File, add))
		default:
			errs = append(errs, r.rebuildMailbox(file))
		}
	}
	if err := errors.Join(errs...); err != nil {
		r.forgetFiles()
		return errors.Join(treeErr, err)
	}
	r.noteFiles(files)
	return treeErr
}

// projectTree does what events asked of the mail tree (State.acts):
// delivers the copies of their messages and sets the read flags of those
// delivered, acknowledged or rejected, and of questions answered. Each
// agent's directory gets its acts in order (a read flag after its copy);
// different agents' directories are written side by side. A fresh copy
// whose recipient has seen it by the end of acts is delivered read at
// once, which writes it once instead of twice. It returns the errors met,
// joined.
func (r *Run) projectTree(acts []treeAct) error {
	tree := r.root.Mail()
	fresh := map[string]int{} // agent/id of a fresh copy -> its act
	byAgent := map[string][]*treeAct{}
	var agents []string
	for i := range acts {
		a := &acts[i]
		if a.Deliver != nil && a.fresh {
			fresh[a.Agent+"/"+a.Deliver.ID] = i
		} else if a.Deliver == nil && len(fresh) > 0 {
			for _, c := range a.Seen {
				if j, ok := fresh[a.Agent+"/"+c.ID]; ok {
					acts[j].read = true
				}
			}
		}
		if byAgent[a.Agent] == nil {
			agents = append(agents, a.Agent)
		}
		byAgent[a.Agent] = append(byAgent[a.Agent], a)
	}
	errs := make([]error, len(agents))
	do := func(k int) {
		agent := agents[k]
		d, err := r.mailDir(tree, agent)
		if err != nil {
			errs[k] = err
			return
		}
		var es []error
		for _, a := range byAgent[agent] {
			if a.Deliver != nil {
				es = append(es, deliverCopy(d, a.Deliver, a.read, a.fresh))
				continue
			}
			for _, c := range a.Seen {
				if _, ok := fresh[a.Agent+"/"+c.ID]; ok {
					continue // delivered read
				}
				es = append(es, d.SetRead(copyName(c), true, false))
			}
		}
		if errs[k] = errors.Join(es...); errs[k] != nil {
			r.closeMailDir(agent) // opened again, and checked, next time
		}
	}
	if len(agents) == 1 {
		do(0)
		return errs[0]
	}
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range min(len(agents), treeWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1)) - 1; k < len(agents); k = int(next.Add(1)) - 1 {
				do(k)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// treeWorkers is how many agents' mail directories projectTree writes at
// once: file creation is mostly system time, which several processors
// share out.
const treeWorkers = 4

// rebuildMailbox rewrites one mailbox file from the log, streaming: its
// memory does not grow with the file.
func (r *Run) rebuildMailbox(file string) error {
	c, err := events.Read(r.EventsPath(), 0)
	if err != nil {
		return err
	}
	defer c.Close()
	return writeAtomicFunc(r.MailboxPath(file), r.root.Perm.File, false, func(w io.Writer) error {
		return c.Scan(nil, func(e *events.Event) error {
			if e.Message == nil || mailbox.FileFor(e.Message) != file {
				return nil
			}
			line, err := events.Marshal(e.Message)
			if err != nil {
				return nil
			}
			_, err = w.Write(line)
			return err
		})
	})
}

// writeAtomicFunc writes what fill writes (through a buffer, so that it
// need not be held in memory whole) to a hidden temporary file beside
// path and renames it over path; with sync, it fsyncs the file before
// and the directory after.
func writeAtomicFunc(path string, perm os.FileMode, sync bool, fill func(io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := fsys.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	w := bufio.NewWriterSize(fsysWriter{f}, 64<<10)
	err = fill(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil && sync {
		err = fsys.SyncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = fsys.RenameFile(tmp, path)
	}
	if err == nil && sync {
		err = syncDir(dir)
	}
	return err
}

// fsysWriter writes through fsys.Write, so that a test's injected fault
// reaches buffered writes too.
type fsysWriter struct{ f *os.File }

func (w fsysWriter) Write(b []byte) (int, error) { return fsys.Write(w.f, b) }

// mailTypes maps message kinds to mail-async types (SPEC §5).
var mailTypes = map[string]string{
	events.KindQuestion: "coordination",
	events.KindResponse: "coordination",
	events.KindSteer:    "coordination",
	events.KindFollowUp: "work_assignment",
	events.KindNudge:    "health_escalation",
	events.KindReport:   "completion_report",
	events.KindMessage:  "coordination",
}

// mailDir returns agent's mail directory, open: the one this process
// opened earlier while it holds the run lock (lockEpoch), or newly
// opened, the mailbox created if it has none, since a run message is
// delivered to every recipient. Different agents' directories may be used
// at once; one agent's by one goroutine at a time.
func (r *Run) mailDir(tree mailbox.Store, agent string) (mailbox.AgentBox, error) {
	r.hmu.Lock()
	d := r.held.dirs[agent]
	r.hmu.Unlock()
	if d != nil {
		return d, nil
	}
	d, err := tree.OpenAgent(agent)
	if errors.Is(err, crew.ErrNotFound) {
		if err := tree.Create(agent); err != nil {
			return nil, err
		}
		d, err = tree.OpenAgent(agent)
	}
	if err != nil {
		return nil, err
	}
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.held.dirs == nil {
		r.held.dirs = map[string]mailbox.AgentBox{}
	}
	r.held.dirs[agent] = d
	return d, nil
}

// closeMailDir closes and forgets agent's mail directory, if mailDir
// holds it open.
func (r *Run) closeMailDir(agent string) {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if d := r.held.dirs[agent]; d != nil {
		d.Close()
		delete(r.held.dirs, agent)
	}
}

// deliverCopy delivers the mail-tree copy of a run message into d. It is
// a projection of the fsynced log, so it is not fsynced itself (SPEC §5);
// a copy lost in a crash is delivered again, under the same name. A fresh
// message (committed by this projection's batch) has no copy anywhere yet.
func deliverCopy(d mailbox.AgentBox, m *events.Message, read, fresh bool) error {
	subject := fmt.Sprintf("%s from %s (run %s, task %s)", m.Kind, m.From, m.Run, m.Task)
	mail := mailbox.Mail{
		ID: m.ID, From: m.From, To: d.Agent(), Type: mailTypes[m.Kind], Subject: subject, Body: m.Body,
		Timestamp: m.SentAt.Time, Priority: m.Priority, Run: m.Run, Task: m.Task, Kind: m.Kind, Read: read,
	}
	var err error
	if fresh {
		_, err = d.DeliverNew(mail)
	} else {
		_, err = d.Deliver(mail, false)
	}
	return err
}
