package nats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
	"github.com/crew-dev/crew/store/commit"
)

// Log is a run's log on JetStream (store.Log), with the state this
// process has reduced from it. The state starts from the run's snapshot
// (SnapshotBucket), when it is usable, and replays the log after it;
// each call reads only what was appended since the last.
//
// Where the file store serialises writers with the run lock, this one
// lets them race and lets the server pick the winner (Store.Append's
// condition on the last seq); the loser reads what won and validates
// again. An operation returns once its event is stored and its mail
// copies are delivered: there is no projector to wait for.
type Log struct {
	s        *Store
	run      string
	manifest state.Manifest
	// project delivers the mail-tree copies and read flags that acts ask
	// for (projectTree, as the file store does after its fsync).
	project func([]mailbox.Act) error
	// dirs are the agents' mail directories projections have opened.
	dirs map[string]mailbox.AgentBox

	mu sync.Mutex
	st *state.State // as of st.Seq; nil until first read
	// acts are what the events after from ask of the mail tree, not yet
	// known to be done: from is the projection mark (Store.	// Projected) when st was started, so a process that replays a long
	// log keeps only the few acts that may still be missing.
	acts []mailbox.Act
	from int64
	// mark and markRev are the projection mark as this process last read
	// or set it (markKnown false: not read yet); a compare-and-set on a
	// revision another process has moved fails, and the mark is read
	// again. markAt is when this process last set it.
	mark      int64
	markRev   uint64
	markKnown bool
	markAt    time.Time
	// done is the seq up to which this process has delivered every copy
	// (at least as far as mark), which the mark may lag behind.
	done int64
	// snapSeq is the seq of the latest snapshot this process read or
	// wrote (0: none), from which the next is due (snapshotDue).
	snapSeq int64
}

// While a process is the run's only writer, the projection mark may lag
// behind what it has delivered by up to markEvery events or markAge: a
// writer that dies leaves its successor at most that much to deliver
// again (each delivery is idempotent), and an operation costs one write
// less. A process that has not set the mark yet (a crew command) sets
// it, and so does one that finds other writers' events since its last
// operation: their copies are theirs to deliver, and the mark, read
// first, says which they have.
const (
	markEvery = 32
	markAge   = time.Second
)

// maxActs is how many acts a process keeps before it reads the mark to
// drop those already done: a process that only reads (crew run wait,
// crew watch) would otherwise keep one per message it sees.
const maxActs = 1024

// catchUp brings the cached state to the log's end and returns it. The
// caller holds l.mu and must not keep the state past it.
func (l *Log) catchUp(ctx context.Context) (*state.State, error) {
	if l.st == nil {
		// The snapshot first, then the mark: a snapshot is used only if
		// the mark has reached it (SnapshotBucket), so that the copies
		// of the events before it are known to be delivered.
		snap := l.s.loadSnapshot(ctx, l.run)
		if err := l.readMark(ctx); err != nil {
			return nil, err
		}
		if snap == nil || snap.Seq > l.mark {
			snap = state.New()
		}
		l.st, l.acts, l.from = snap, nil, l.mark
		l.snapSeq = max(l.snapSeq, snap.Seq)
	}
	st := l.st
	err := l.s.Read(ctx, l.run, st.Seq, func(e *events.Event) error {
		effects, err := st.Apply(e)
		if e.Seq > l.from {
			l.acts = mailbox.AppendActs(l.acts, effects, false)
		}
		if err != nil {
			st.Damage = append(st.Damage, err.Error())
			st.Seq = e.Seq
		}
		return nil
	})
	if errors.Is(err, crew.ErrDamaged) {
		// A message of the stream that is no event: readers say so
		// (exit 7) and writers refuse, as with a damaged file log.
		if !slices.Contains(st.Damage, err.Error()) {
			st.Damage = append(st.Damage, err.Error())
		}
		return st, nil
	}
	if err != nil {
		l.st = nil // start again from the log next time
		return nil, err
	}
	if st.Seq == 0 {
		return nil, fmt.Errorf("run %s on %s holds no events, not even run.created: %w", l.run, l.s, crew.ErrDamaged)
	}
	if len(l.acts) > maxActs && l.readMark(ctx) == nil {
		l.acts = slices.DeleteFunc(l.acts, func(a mailbox.Act) bool { return a.Seq <= max(l.mark, l.done) })
	}
	return st, nil
}

// Manifest implements store.Log.
func (l *Log) Manifest() state.Manifest { return l.manifest }

// Dir implements store.Log: a run on JetStream has no directory.
func (l *Log) Dir() string { return "" }

// String implements store.Log: the run and its server.
func (l *Log) String() string { return "run " + l.run + " on " + l.s.String() }

// State implements store.Log: a copy of the run's state at the log's
// end. It always tracks every open message, whatever empty tracks: the
// whole state is at hand.
func (l *Log) State(ctx context.Context, empty *state.State) (*state.State, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, err := l.catchUp(ctx)
	if err != nil {
		return nil, err
	}
	l.checkpoint(ctx)
	return st.Copy(), nil
}

// Commit implements store.Log through the commit engine (store/commit),
// one operation at a time: it validates c against the state this
// process has and appends its event as the next seq, on the condition
// that the log still ends there (Store.Append): a state that is behind
// the log fails that condition, so it need not be read first. When
// another writer appended first, or Validate refuses (or has nothing to
// do) on a state that may be behind, the engine has it read what was
// appended and validates again. One operation id (Nats-Msg-Id) serves
// every attempt, so an append whose acknowledgement was lost is stored
// once. Then the event's mail-tree copies are delivered (projectUpTo).
func (l *Log) Commit(ctx context.Context, c store.Change) (*events.Event, error) {
	opID, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	o := &commit.Op{Ctx: ctx, Change: c}
	commit.Engine{Run: l.run}.Commit(ctx, &tail{l: l, opID: opID.String()}, []*commit.Op{o})
	return o.Event, o.Err
}

// tail is a Log's end for one Commit (commit.Tail). The caller holds
// l.mu.
type tail struct {
	l    *Log
	opID string
	// current: l.st was read to the log's end during this Commit;
	// behind: the engine found it behind, so it is read again.
	current, behind bool
	end             int64 // the seq Load returned
}

// Load implements commit.Tail: the state this process has, read first
// when it has none, when the engine found it behind, or when it holds
// damage that may have been read before a repair. Writers refuse a
// damaged log, as in the file store. The state tracks every open
// message, whatever open says.
func (t *tail) Load(ctx context.Context, open bool) (*state.State, bool, error) {
	l := t.l
	if l.st == nil || t.behind || !t.current && len(l.st.Damage) > 0 {
		if _, err := l.catchUp(ctx); err != nil {
			return nil, false, err
		}
		t.current, t.behind = true, false
	}
	if err := l.st.Err(); err != nil {
		return nil, false, err
	}
	t.end = l.st.Seq
	return l.st, t.current, nil
}

// Behind implements commit.Tail: a dirty state is replayed from the
// start, one that is only behind from where it is.
func (t *tail) Behind(dirty bool) {
	if dirty {
		t.l.st = nil
	}
	t.behind = true
}

// CatchUp implements commit.Tail: it folds into view the events after
// it up to the seq Load returned.
func (t *tail) CatchUp(ctx context.Context, view *state.State) error {
	if view.Seq >= t.end {
		return nil
	}
	err := t.l.s.Read(ctx, t.l.run, view.Seq, func(e *events.Event) error {
		if e.Seq > t.end {
			return events.ErrStopScan
		}
		view.Apply(e)
		return nil
	})
	if err == events.ErrStopScan {
		// Other writers appended past the end Load saw: the commit
		// engine's append finds out, and the operation tries again.
		return nil
	}
	return err
}

// Append implements commit.Tail: Store.Append, whose condition on the
// last seq is the compare-and-swap. The NATS store commits one event at
// a time.
func (t *tail) Append(ctx context.Context, last int64, evs []*events.Event, _ []byte) error {
	if len(evs) != 1 || evs[0].Seq != last+1 {
		return fmt.Errorf("append to run %s: %d events after seq %d; the NATS store appends one at a time", t.l.run, len(evs), last)
	}
	return t.l.s.Append(ctx, evs[0], t.opID)
}

// Project implements commit.Tail: what is committed is best effort from
// here, as the file store's projections are: the next writer catches up
// what is missed.
func (t *tail) Project(ctx context.Context, _ *state.State, evs []*events.Event, acts []mailbox.Act) {
	if len(evs) == 0 {
		return
	}
	t.l.s.notify(t.l.run, evs)
	t.l.acts = append(t.l.acts, acts...)
	ctx = context.WithoutCancel(ctx)
	t.l.projectUpTo(ctx, evs[len(evs)-1].Seq, false)
	t.l.checkpoint(ctx)
}

// checkpoint writes the state as the run's snapshot when one is due
// (snapshotDue) and this process may write it (Store.maySnapshot). In
// the order SnapshotBucket asks: it delivers the copies up to the
// state's seq that are not known to be delivered and moves the
// projection mark there (projectUpTo), then writes the snapshot. A
// failure leaves the snapshot to the next writer it is due for. The
// caller holds l.mu.
func (l *Log) checkpoint(ctx context.Context) {
	st := l.st
	if st == nil || len(st.Damage) > 0 || !l.s.maySnapshot() || !snapshotDue(st, l.snapSeq) {
		return
	}
	seq := st.Seq
	l.snapSeq = seq // tried once: a snapshot that cannot be written is not tried on every commit
	if l.projectUpTo(ctx, seq, true); !l.markKnown || l.mark < seq {
		return
	}
	l.s.writeSnapshot(ctx, st)
}

// SetAsync implements store.Log: an operation returns once its mail
// copies are delivered, whatever on says.
func (l *Log) SetAsync(on bool) {}

// Sync implements store.Log: there is nothing to wait for, every
// operation having delivered its copies before it returned.
func (l *Log) Sync() {}

// projectUpTo delivers the mail-tree copies of the events up to seq that
// neither the projection mark nor this process has delivered, and moves
// the mark (compare-and-set, so marks only grow; see markEvery). Every
// step is idempotent (a copy keeps its name; a read flag set twice is
// set), so two writers projecting the same events is harmless, and the
// copies of a writer that died after its append are delivered by the
// next, as docs/mail-tree.md (Copies of run messages) asks of the file store. A failure leaves the mark
// where it was, and the next operation tries again. With force, the
// mark is moved to seq however little it lags (a snapshot at seq is to
// be written: checkpoint).
func (l *Log) projectUpTo(ctx context.Context, seq int64, force bool) {
	// Events between this process's last operation and this one are
	// other writers'.
	others := seq-1 > l.done
	if (!l.markKnown || others) && l.readMark(ctx) != nil {
		return
	}
	var todo []mailbox.Act
	for _, a := range l.acts {
		if a.Seq > max(l.mark, l.done) && a.Seq <= seq && l.s.mayProject(a) {
			todo = append(todo, a)
		}
	}
	if l.project(todo) != nil {
		return
	}
	l.done = seq
	l.acts = slices.DeleteFunc(l.acts, func(a mailbox.Act) bool { return a.Seq <= seq })
	if l.s.role == RoleWorker {
		// A worker delivers only its own copies: the mark, which says
		// every copy up to it is delivered, is the leader's to move.
		return
	}
	if !force && !others && seq-l.mark < markEvery && time.Since(l.markAt) < markAge {
		return
	}
	for range 5 {
		if l.mark >= seq {
			return // another writer has moved it past
		}
		rev, err := l.s.SetProjected(ctx, l.run, seq, l.markRev)
		if err == nil {
			l.mark, l.markRev, l.markAt = seq, rev, time.Now()
			return
		}
		if !errors.Is(err, crew.ErrConflict) || l.readMark(ctx) != nil {
			return
		}
	}
}

// readMark reads the projection mark.
func (l *Log) readMark(ctx context.Context) error {
	mark, rev, err := l.s.Projected(ctx, l.run)
	if err != nil {
		l.markKnown = false
		return err
	}
	l.mark, l.markRev, l.markKnown = mark, rev, true
	return nil
}

// Bodies implements store.Log: list is in seq order, and one read of
// the log from its first entry's seq picks their messages.
func (l *Log) Bodies(ctx context.Context, list []*state.Open, fn func(*events.Message) error) error {
	if len(list) == 0 {
		return nil
	}
	i := 0
	err := l.s.Read(ctx, l.run, list[0].Seq-1, func(e *events.Event) error {
		for ; i < len(list) && list[i].Seq == e.Seq; i++ {
			if e.Message == nil || e.Message.ID != list[i].ID {
				return fmt.Errorf("seq %d of run %s does not hold message %s: %w", e.Seq, l.run, list[i].ID, crew.ErrDamaged)
			}
			m := *e.Message
			if err := fn(list[i].Current(&m)); err != nil {
				return err
			}
		}
		if i == len(list) {
			return events.ErrStopScan
		}
		return nil
	})
	if err == events.ErrStopScan {
		err = nil
	}
	if err == nil && i < len(list) {
		err = fmt.Errorf("run %s on %s has no event with seq %d (message %s): %w", l.run, l.s, list[i].Seq, list[i].ID, crew.ErrDamaged)
	}
	return err
}

// Watch implements store.Log: a subscription to what is appended from
// the log's current head on. A subscription that cannot start (within
// watchTimeout) makes Wait return why.
//
// With participants it wakes only for the events that concern one of
// them, through core NATS wake-ups (wake.go).
func (l *Log) Watch(participants ...string) store.Waiter {
	ctx, cancel := context.WithTimeout(context.Background(), watchTimeout)
	defer cancel()
	if len(participants) > 0 {
		w, err := l.s.watchFor(ctx, l.run, participants)
		if err != nil {
			return errWaiter{fmt.Errorf("watch run %s: %w", l.run, err)}
		}
		return w
	}
	head, err := l.s.Head(ctx, l.run)
	if err == nil {
		var w store.Waiter
		if w, err = l.s.Watch(ctx, l.run, head); err == nil {
			return w
		}
	}
	return errWaiter{fmt.Errorf("watch run %s: %w", l.run, err)}
}

// watchTimeout bounds starting a subscription.
const watchTimeout = 30 * time.Second

// errWaiter is a Waiter that could not be started: Wait returns why.
type errWaiter struct{ err error }

func (w errWaiter) Wait(context.Context) error { return w.err }
func (w errWaiter) Close() error               { return nil }

// Events implements store.Log: a cursor that reads the stream in
// batches from since+1 on.
func (l *Log) Events(since int64) (store.Cursor, error) {
	return &cursor{l: l, seq: since}, nil
}

// projectTree delivers what acts ask of the mail tree (mailbox.Project)
// through the agents' mail directories this Log keeps open. The caller
// holds l.mu.
func (l *Log) projectTree(acts []mailbox.Act) error {
	tree := l.s.Mail()
	open := func(agent string) (mailbox.AgentBox, error) {
		if d := l.dirs[agent]; d != nil {
			return d, nil
		}
		d, err := mailbox.OpenCreating(tree, agent)
		if err != nil {
			return nil, err
		}
		if l.dirs == nil {
			l.dirs = map[string]mailbox.AgentBox{}
		}
		l.dirs[agent] = d
		return d, nil
	}
	var mu sync.Mutex // Project opens several agents' directories at once
	return mailbox.Project(acts, func(agent string) (mailbox.AgentBox, error) {
		mu.Lock()
		defer mu.Unlock()
		return open(agent)
	}, func(agent string) {
		mu.Lock()
		defer mu.Unlock()
		if d := l.dirs[agent]; d != nil {
			d.Close()
			delete(l.dirs, agent)
		}
	})
}

// batch is how many events a cursor reads from the store at
// a time.
const batch = 512

// cursor is a store.Cursor on a Log: it reads the store in
// batches of batch from the seq it has reached, and at the end of
// the log returns io.EOF, then later what was appended meanwhile, as a
// file cursor does.
type cursor struct {
	l   *Log
	seq int64 // the seq of the last event returned
	buf []*events.Event
	err error // what stopped the read that filled buf, returned after buf
}

func (c *cursor) Next() (events.Event, error) {
	if len(c.buf) == 0 && c.err != nil {
		err := c.err
		c.err = nil
		return events.Event{}, err
	}
	if len(c.buf) == 0 {
		err := c.l.s.Read(context.Background(), c.l.run, c.seq, func(e *events.Event) error {
			c.buf = append(c.buf, e)
			if len(c.buf) == batch {
				return events.ErrStopScan
			}
			return nil
		})
		if err != nil && err != events.ErrStopScan {
			if len(c.buf) == 0 {
				return events.Event{}, err
			}
			c.err = err // the events before it first (a damaged message: what could be read is read)
		}
		if len(c.buf) == 0 {
			return events.Event{}, io.EOF
		}
	}
	e := c.buf[0]
	c.buf = c.buf[1:]
	c.seq = e.Seq
	return *e, nil
}

func (c *cursor) Scan(damage func(*events.DamageError), fn func(*events.Event) error) error {
	return events.Scan(c.Next, damage, fn)
}

func (c *cursor) Close() error { return nil }
