package run

import (
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
	"syscall"

	"github.com/gofrs/flock"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/internal/jsonl"
	"github.com/crew-dev/crew/mailbox"
)

// Run is one coordinated job: a directory .crew/state/runs/<run>/. Its
// methods are safe for concurrent use by goroutines; any number of
// processes may use the same run at once (the run lock serialises writes).
type Run struct {
	Manifest Manifest
	root     *Root
	dir      string

	mu      sync.Mutex // guards queue, leading and cache
	queue   []*op
	leading bool
	cache   *State      // state as of the last commit by this process
	cacheFI os.FileInfo // identity of the log the cache was read from
}

// ID returns the run id.
func (r *Run) ID() string { return r.Manifest.ID }

// Dir returns the run directory.
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
	fn   func(*State) (*events.Event, error)
	ev   *events.Event
	err  error
	done chan struct{}
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
func (r *Run) commit(ctx context.Context, fn func(*State) (*events.Event, error)) (*events.Event, error) {
	o := &op{fn: fn, done: make(chan struct{})}
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
		err := r.commitBatch(batch)
		r.mu.Lock()
		for _, b := range batch {
			if err != nil && b.err == nil {
				b.err, b.ev = err, nil
			}
			close(b.done)
		}
	}
	r.leading = false
	r.mu.Unlock()
	return o.ev, o.err
}

func (r *Run) lock() (*flock.Flock, error) {
	if fi, err := os.Lstat(r.path("run.lock")); err == nil && !fi.Mode().IsRegular() {
		// flock opens with O_CREATE: a link would be followed.
		return nil, fmt.Errorf("lock run %s: %s: %w", r.ID(), r.path("run.lock"), fsys.ErrLink)
	}
	fl := flock.New(r.path("run.lock"))
	if err := fl.Lock(); err != nil {
		return nil, fmt.Errorf("lock run %s: %w", r.ID(), err)
	}
	return fl, nil
}

func (r *Run) commitBatch(batch []*op) error {
	fl, err := r.lock()
	if err != nil {
		return err
	}
	defer fl.Unlock()
	w, err := events.OpenWriter(r.EventsPath())
	if err != nil {
		return err
	}
	defer w.Close()
	st, caughtUp, before, err := r.loadForWrite(w)
	if err != nil {
		return err
	}
	var (
		buf []byte
		evs []*events.Event
	)
	for _, o := range batch {
		ev, err := o.fn(st)
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
		if err := st.apply(ev); err != nil {
			o.err = err
			continue
		}
		buf = append(buf, line...)
		evs = append(evs, ev)
		o.ev = ev
	}
	if len(buf) > 0 {
		if err := w.AppendRaw(buf); err != nil {
			r.dropCache()
			return err
		}
		st.Offset = w.Size()
	}
	r.keepCache(st, w)
	// Committed. Projections are best effort from here: a failure leaves
	// them behind the log, and the next writer catches up.
	caughtUp = append(caughtUp, evs...)
	if len(caughtUp) > 0 {
		if err := r.project(st, caughtUp, before); ioFailure(err) {
			// A projection could not be written (a full disk, say): leave
			// tasks.json behind, so that the next writer replays these
			// events and projects them again (every step is idempotent).
			r.dropCache()
			return nil
		}
		r.writeSnapshot(st)
	}
	return nil
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

func (r *Run) dropCache() {
	r.mu.Lock()
	r.cache, r.cacheFI = nil, nil
	r.mu.Unlock()
}

func (r *Run) keepCache(st *State, w *events.Writer) {
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
// lock, the events replayed after the snapshot it started from (their
// projections may be missing: a writer may have crashed after its fsync),
// and the snapshot's State.Files: where the mailbox files stood before
// those events.
func (r *Run) loadForWrite(w *events.Writer) (*State, []*events.Event, map[string]int64, error) {
	if last, ok, err := w.Last(); err != nil {
		return nil, nil, nil, fmt.Errorf("%w; run crew repair %s", err, r.ID())
	} else if !ok {
		return nil, nil, nil, fmt.Errorf("run %s has an empty log; run crew repair %s: %w", r.ID(), r.ID(), crew.ErrDamaged)
	} else {
		_ = last
	}
	r.mu.Lock()
	st, fi := r.cache, r.cacheFI
	r.mu.Unlock()
	if st != nil {
		// Our own state is current unless another process appended since,
		// or the log was replaced (repair): then replay only what is new.
		cur, err := os.Stat(r.EventsPath())
		if err != nil || !os.SameFile(cur, fi) || st.Offset > w.Size() {
			st = nil
		} else if st.Offset == w.Size() {
			return st, nil, maps.Clone(st.Files), nil
		}
	}
	if st == nil {
		st = r.readSnapshot()
	}
	before := maps.Clone(st.Files)
	evs, err := r.replay(st, w.Size(), true)
	return st, evs, before, err
}

// replay folds the log from st.Offset up to size into st. Damaged lines are
// skipped and remembered in st.Damage (readers then exit 7). When keep is
// set, the events replayed are returned.
func (r *Run) replay(st *State, size int64, keep bool) ([]*events.Event, error) {
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
		if err := st.apply(&e); err != nil {
			st.Damage = append(st.Damage, err.Error())
			continue
		}
		if keep {
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
// without user action.
func (r *Run) readSnapshot() *State {
	data, err := os.ReadFile(r.path("tasks.json"))
	if err != nil {
		return newState()
	}
	st := newState()
	st.Files = nil // a snapshot without them is from an older crew: replay
	if json.Unmarshal(data, st) != nil || st.Seq <= 0 || st.Offset <= 0 || st.Files == nil {
		return newState()
	}
	f, err := os.Open(r.EventsPath())
	if err != nil {
		return newState()
	}
	defer f.Close()
	l, ok, err := jsonl.LineBefore(f, st.Offset)
	if err != nil || !ok {
		return newState()
	}
	if seq, ok := jsonl.SeqOf(l.Data); !ok || seq != st.Seq {
		return newState()
	}
	if st.Tasks == nil {
		st.Tasks = map[string]*Task{}
	}
	if st.Open == nil {
		st.Open = map[string]*Open{}
	}
	return st
}

// writeSnapshot replaces tasks.json atomically (temp file, rename). It is a
// projection, so it is not fsynced: a lost snapshot is rebuilt from the log.
func (r *Run) writeSnapshot(st *State) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return writeAtomic(r.path("tasks.json"), append(data, '\n'), r.root.Perm.File, false)
}

// writeAtomic writes data to a hidden temporary file beside path and
// renames it over path; with sync, it fsyncs the file before and the
// directory after.
func writeAtomic(path string, data []byte, perm os.FileMode, sync bool) error {
	dir := filepath.Dir(path)
	f, err := fsys.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := fsys.Write(f, data); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := fsys.SyncFile(f); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp, perm); err != nil {
		return err
	}
	if err := fsys.RenameFile(tmp, path); err != nil {
		return err
	}
	if sync {
		return syncDir(dir)
	}
	return nil
}

// State returns the run's current state, read without the run lock:
// tasks.json plus the log after it. Damage met on the way is listed in
// State.Damage.
func (r *Run) State() (*State, error) {
	st := r.readSnapshot()
	fi, err := os.Stat(r.EventsPath())
	if err != nil {
		return nil, err
	}
	complete, err := completeSize(r.EventsPath(), fi.Size())
	if err != nil {
		return nil, err
	}
	if st.Offset > complete {
		st = newState()
	}
	if _, err := r.replay(st, complete, false); err != nil {
		return nil, err
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
// rebuilt from the log.
func (r *Run) project(st *State, evs []*events.Event, before map[string]int64) error {
	lines := map[string][]events.Message{}
	for _, e := range evs {
		if m := e.Message; m != nil {
			lines[mailbox.FileFor(m)] = append(lines[mailbox.FileFor(m)], *m)
		}
	}
	errs := []error{r.projectTree(st, evs)}
	if err := mkdir(r.path("mailbox"), r.root.Perm); err != nil {
		return errors.Join(append(errs, err)...) // e.g. a symbolic link: not written through
	}
	for _, file := range mailbox.Files {
		key := strings.TrimSuffix(file, ".jsonl")
		want := st.Files[key]
		have, err := mailbox.LastSeq(r.MailboxPath(file))
		_, serr := os.Lstat(r.MailboxPath(file))
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
	return errors.Join(errs...)
}

// projectTree delivers the mail-tree copies of the events' messages and
// sets the read flags of those delivered, acknowledged or rejected. It returns the
// errors met, joined.
func (r *Run) projectTree(st *State, evs []*events.Event) error {
	tree := r.root.MailTree()
	var errs []error
	for _, e := range evs {
		if m := e.Message; m != nil {
			for _, agent := range r.recipients(st, e) {
				errs = append(errs, r.deliverCopy(tree, agent, m))
			}
		}
		if e.Type == events.MessageDelivered || e.Type == events.MessageAcknowledged || e.Type == events.MessageRejected {
			// Acknowledged and rejected both come after delivered: seen.
			agent := r.agentOf(st, e.Task)
			for _, id := range e.MessageIDs {
				errs = append(errs, tree.SetRead(agent, id, true, false))
			}
		}
		if e.Type == events.TaskResponded && e.Message != nil && e.Message.ReplyTo != "" {
			// A response answers the question: the leader has seen it.
			errs = append(errs, tree.SetRead(r.Manifest.Leader, e.Message.ReplyTo, true, false))
		}
	}
	return errors.Join(errs...)
}

// rebuildMailbox rewrites one mailbox file from the log.
func (r *Run) rebuildMailbox(file string) error {
	c, err := events.Read(r.EventsPath(), 0)
	if err != nil {
		return err
	}
	defer c.Close()
	var buf []byte
	for {
		e, err := c.Next()
		if err == io.EOF {
			break
		}
		if e.Message == nil || mailbox.FileFor(e.Message) != file {
			continue
		}
		line, err := events.Marshal(e.Message)
		if err != nil {
			continue
		}
		buf = append(buf, line...)
	}
	return writeAtomic(r.MailboxPath(file), buf, r.root.Perm.File, false)
}

// agentOf returns the agent whose mail tree holds a participant's copies:
// the task's agent, or the leader for "" and the leader's name.
func (r *Run) agentOf(st *State, participant string) string {
	if t := st.Tasks[participant]; t != nil {
		return t.Agent
	}
	return r.Manifest.Leader
}

// recipients returns the agents a message event is delivered to.
func (r *Run) recipients(st *State, e *events.Event) []string {
	m := e.Message
	switch {
	case m.Direction == events.Outbox:
		return []string{r.Manifest.Leader}
	case m.To == events.Broadcast:
		var d broadcastData
		json.Unmarshal(e.Data, &d)
		var agents []string
		for _, t := range d.Recipients {
			agents = append(agents, r.agentOf(st, t))
		}
		return agents
	default:
		return []string{r.agentOf(st, m.To)}
	}
}

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

// deliverCopy delivers the mail-tree copy of a run message. It is a
// projection of the fsynced log, so it is not fsynced itself (SPEC §5); a
// copy lost in a crash is delivered again, under the same name.
func (r *Run) deliverCopy(tree mailbox.Tree, agent string, m *events.Message) error {
	if !tree.Exists(agent) {
		if err := tree.Create(agent); err != nil {
			return err
		}
	}
	subject := fmt.Sprintf("%s from %s (run %s, task %s)", m.Kind, m.From, m.Run, m.Task)
	_, err := tree.Deliver(agent, mailbox.Mail{
		ID: m.ID, From: m.From, To: agent, Type: mailTypes[m.Kind], Subject: subject, Body: m.Body,
		Timestamp: m.SentAt.Time, Priority: m.Priority, Run: m.Run, Task: m.Task, Kind: m.Kind,
	}, false)
	return err
}
