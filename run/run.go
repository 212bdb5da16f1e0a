package run

import (
	"context"
	"fmt"
	"sort"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
)

// Run is one coordinated job, on the store its Root chose. Its methods
// are safe for concurrent use by goroutines; any number of processes may
// use the same run at once.
type Run struct {
	Manifest state.Manifest
	root     *Root
	log      store.Log
}

func (r *Root) newRun(l store.Log) *Run { return &Run{Manifest: l.Manifest(), root: r, log: l} }

// ID returns the run id.
func (r *Run) ID() string { return r.Manifest.ID }

// Dir returns the run directory ("" for a run on a store without files).
func (r *Run) Dir() string { return r.log.Dir() }

// Root returns the state root the run lives in.
func (r *Run) Root() *Root { return r.root }

// Log returns the run's log in its store.
func (r *Run) Log() store.Log { return r.log }

// commit commits one operation: fn validates it against the run's state
// and returns its event (store.Change).
func (r *Run) commit(ctx context.Context, fn func(*state.State) (*events.Event, error)) (*events.Event, error) {
	return r.log.Commit(ctx, store.Change{Validate: fn})
}

// commitOpen is commit for an fn that reads State.Open.
func (r *Run) commitOpen(ctx context.Context, fn func(*state.State) (*events.Event, error)) (*events.Event, error) {
	return r.log.Commit(ctx, store.Change{Validate: fn, State: state.New()})
}

// State returns the run's current state: its tasks and its open
// messages. Damage met on the way is listed in State.Damage.
func (r *Run) State() (*state.State, error) {
	return r.log.State(context.Background(), state.New())
}

// TaskState is State without the open messages (State.Open is nil): the
// tasks only, which stays cheap however many messages are open.
func (r *Run) TaskState() (*state.State, error) {
	return r.log.State(context.Background(), state.NewTasks())
}

// ReadWhole reads the run's whole log, from its first event, and returns
// the tasks it reduces to (as TaskState), with every damaged place met
// on the way in State.Damage (State.Err wraps crew.ErrDamaged): no
// snapshot is trusted, so damage anywhere in the log, also bytes changed
// in place before a snapshot's offset, is found. It costs a read of the
// whole log: a verdict (supervise.WaitRunWith's) reads it, a listing
// reads TaskState (docs/guarantees.md, Which commands read the whole
// log). Errors: ctx's, or the store's when the log cannot be read at all.
func (r *Run) ReadWhole(ctx context.Context) (*state.State, error) {
	c, err := r.Events(0)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	st := state.NewTasks()
	err = c.Scan(func(de *events.DamageError) {
		st.Damage = append(st.Damage, de.Error())
	}, func(e *events.Event) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := st.Apply(e); err != nil {
			st.Damage = append(st.Damage, err.Error())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if st.Seq == 0 {
		st.Damage = append(st.Damage, r.log.String()+" holds no events, not even run.created")
	}
	return st, nil
}

// stateFor is State with the open messages of one participant only (a
// task id, or Leader); for a task, with that task only (state.For).
func (r *Run) stateFor(participant string) (*state.State, error) {
	return r.log.State(context.Background(), state.For(participant))
}

// taskIn returns task id of st, a state stateFor read. One that holds
// that task only has no other to name in its error: an id it lacks is
// looked up in the run's tasks, so that the error names the id it most
// likely meant (state.NoTaskError), as for any other state.
func (r *Run) taskIn(st *state.State, id string) (*state.Task, error) {
	t, err := st.Task(id)
	if _, one := st.OneTask(); err == nil || !one {
		return t, err
	}
	if all, aerr := r.TaskState(); aerr == nil {
		if _, aerr := all.Task(id); aerr != nil {
			err = aerr
		}
	}
	return nil, err
}

// Events returns a cursor on the run's log after seq since (0: the whole
// log). Every reader of the log (events, watch, await, run report) reads
// through it, whichever store the run is in. Close it.
func (r *Run) Events(since int64) (store.Cursor, error) { return r.log.Events(since) }

// Watch returns a Waiter that wakes when the run's log may have grown
// (store.Log.Watch: fsnotify on files, a subscription on NATS). Create
// it before reading, so that nothing appended in between is missed; a
// wake-up is a hint: read from a cursor to see what is new. Close it.
// With participants (task ids, Leader) it wakes only for the events that
// concern them (state.Concerns): a worker waiting for its answer is not
// woken by every other worker's commit. Without, every commit wakes it.
func (r *Run) Watch(participants ...string) store.Waiter { return r.log.Watch(participants...) }

// SetAsync sets whether operations return as soon as their events are
// durable (true), or only once their mailbox lines and mail-tree copies
// are written too (false, the default; the snapshots follow in the
// background, docs/files.md, Write order). With true, a
// long-lived leader commits its next operation while the projections of
// the last one are still being written; Sync waits for them. Either way
// the log is durable before an operation returns. A store that projects
// before an operation returns (NATS) ignores it.
func (r *Run) SetAsync(on bool) { r.log.SetAsync(on) }

// Sync waits until the projections of every operation committed through
// r are written, snapshots included (see SetAsync).
func (r *Run) Sync() { r.log.Sync() }

// Repair verifies the log and rebuilds every projection from it
// (store.Repairer, the store's; docs/guarantees.md, 4). A run on a store that keeps
// whole events only and no projection files (NATS) has nothing to
// repair: crew.ErrInvalid (exit 2), and nothing is done.
func (r *Run) Repair(ctx context.Context) (*store.RepairReport, error) {
	rp, ok := r.root.Store.(store.Repairer)
	if !ok {
		return nil, fmt.Errorf("run %s lives on %s, not in files: its log is a JetStream stream that takes whole events only, and there are no projection files to rebuild; crew repair is for runs under a .crew directory: %w", r.ID(), r.root, crew.ErrInvalid)
	}
	return rp.Repair(ctx, r.log)
}

// bodies reads the stored messages of the given open entries
// (store.Log.Bodies), in the order given.
func (r *Run) bodies(list []*state.Open) ([]events.Message, error) {
	if len(list) == 0 {
		return nil, nil
	}
	order := make([]int, len(list))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return list[order[i]].Seq < list[order[j]].Seq })
	bySeq := make([]*state.Open, len(list))
	for i, k := range order {
		bySeq[i] = list[k]
	}
	out := make([]events.Message, len(list))
	i := 0
	err := r.log.Bodies(context.Background(), bySeq, func(m *events.Message) error {
		out[order[i]] = *m
		i++
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scan calls fn with the run's events after since (events.Scan: damage
// skipped, ErrStopScan ends it).
func (r *Run) scan(since int64, fn func(*events.Event) error) error {
	c, err := r.Events(since)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Scan(nil, fn)
}
