package run

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
)

// Backend is the narrow storage interface under a run's log, as
// hashicorp/raft has LogStore: every store keeps each run's events, seq
// 1, 2, 3 … with no gaps, and appends one only at the end it was
// validated against. The operations, the reducer (State.apply) and the
// task state machine are written once, in this package, on top of it.
//
// A Root on the state root's files commits through Run.commit (group
// commit under the run lock, projections after the fsync); a Root on a
// RemoteStore (RemoteRoot) commits through remoteLog.commit (optimistic:
// validate against the log as far as it has been read, append on the
// condition that it still ends there, read and validate again on
// conflict). Both hand the same validation closures to State.apply.
//
// Two implementations pass the same conformance suite
// (store/conformance): FileBackend, the state root's files,
// and natsstore.Store, NATS JetStream. Types here are events' only, so a
// backend package need not import run.
type Backend interface {
	// CreateRun creates the run first.Run with first (seq 1, its
	// run.created event, whose Data is the Manifest) as its log. A run
	// id in use in any letter case is crew.ErrConflict; a bad id
	// crew.ErrInvalid.
	CreateRun(ctx context.Context, first *events.Event) error
	// Runs returns the ids of the runs, in no particular order.
	Runs(ctx context.Context) ([]string, error)
	// Append appends ev to the log of ev.Run as seq ev.Seq if and only if
	// the log's last event has seq ev.Seq-1; otherwise it returns an
	// error wrapping crew.ErrConflict and stores nothing. opID names the
	// operation: a store that can lose an acknowledgement (a network)
	// stores an Append retried with the same opID once.
	Append(ctx context.Context, ev *events.Event, opID string) error
	// Head returns the seq of run's last event.
	Head(ctx context.Context, run string) (int64, error)
	// Read calls fn with run's events with seq > since, in seq order, up
	// to the end of the log when Read began; its cost depends on what it
	// returns. An error from fn stops it and is returned.
	Read(ctx context.Context, run string, since int64, fn func(*events.Event) error) error
	// Watch returns a Waiter that wakes when run's log has an event
	// with seq > after (at once if it has one already): by file-system
	// notification or by a subscription, never by polling alone.
	Watch(ctx context.Context, run string, after int64) (Waiter, error)
}

// RemoteStore is a Backend that holds everything a state root holds, for
// a leader and workers that share no files: the runs' logs, the per-agent
// mail tree (SPEC §5) and, per run, how far the run's messages have been
// copied into that tree. natsstore.Store is one: a JetStream stream per
// run and a key-value bucket for the mail. RemoteRoot opens runs on it.
type RemoteStore interface {
	Backend
	// Mail returns the store's mail tree.
	Mail() mailbox.Store
	// Projected returns the seq up to which run's messages have been
	// copied into the mail tree, with a revision for SetProjected; 0, 0
	// when nothing is recorded yet.
	Projected(ctx context.Context, run string) (seq int64, rev uint64, err error)
	// SetProjected records seq for run if rev is still the record's
	// revision (0: if there is no record yet), and returns the record's
	// new revision (compare-and-set); otherwise it returns an error
	// wrapping crew.ErrConflict and records nothing.
	SetProjected(ctx context.Context, run string, seq int64, rev uint64) (uint64, error)
	// String names the store in messages, without credentials
	// ("nats://10.0.0.5:4222").
	String() string
}

// Waiter is what Backend.Watch returns: Wait blocks until the log may
// have grown (a hint: read from a cursor to see what is new) or ctx
// ends; Close stops it. An alias of an interface literal, so that
// backends in other packages can name the same type.
type Waiter = interface {
	Wait(context.Context) error
	Close() error
}

// FileBackend is the Backend of a state root's files: a run's log is
// runs/<run>/events.jsonl, appended under its run lock (run.lock) with
// one write and an fsync. Its Append leaves projections (mailbox files,
// mail tree, tasks.json) to the next commit of the run, which catches
// them up from the log as it does after a crashed writer.
type FileBackend struct{ Root *Root }

// CreateRun implements Backend with Root.Create.
func (b FileBackend) CreateRun(ctx context.Context, first *events.Event) error {
	if err := crew.ValidateID("run", first.Run); err != nil {
		return err // Create would make up an id for an empty one
	}
	var m state.Manifest
	if err := json.Unmarshal(first.Data, &m); err != nil || first.Type != events.RunCreated || first.Seq != 1 {
		return fmt.Errorf("create run %s: the first event must be run.created with seq 1 and a manifest: %w", first.Run, crew.ErrInvalid)
	}
	_, err := b.Root.Create(CreateOptions{ID: first.Run, Title: m.Title, Leader: m.Leader, Dir: m.Dir})
	return err
}

// Runs implements Backend.
func (b FileBackend) Runs(ctx context.Context) ([]string, error) { return b.Root.runIDs() }

// Append implements Backend: under the run lock, the torn tail cut, the
// last line's seq must be ev.Seq-1.
func (b FileBackend) Append(ctx context.Context, ev *events.Event, opID string) error {
	r, err := b.Root.Open(ev.Run)
	if err != nil {
		return err
	}
	if ev.Seq < 1 {
		return fmt.Errorf("append to run %s: seq %d: %w", ev.Run, ev.Seq, crew.ErrInvalid)
	}
	line, err := events.Marshal(ev)
	if err != nil {
		return err
	}
	fl, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer fl.Unlock()
	w, err := events.OpenWriter(r.EventsPath())
	if err != nil {
		return err
	}
	defer w.Close()
	last, ok, err := w.Last()
	if err != nil {
		return err
	}
	if !ok || last.Seq != ev.Seq-1 {
		return fmt.Errorf("append seq %d to run %s: the log ends at seq %d: %w", ev.Seq, ev.Run, last.Seq, crew.ErrConflict)
	}
	return w.AppendRaw(line)
}

// Head implements Backend.
func (b FileBackend) Head(ctx context.Context, run string) (int64, error) {
	r, err := b.Root.Open(run)
	if err != nil {
		return 0, err
	}
	// Read only, without the lock: a writer's line in progress looks
	// torn, and only a lock holder may cut it (events.Last skips it).
	e, _, err := events.Last(r.EventsPath())
	return e.Seq, err
}

// Read implements Backend with events.Read (binary search to the cursor).
func (b FileBackend) Read(ctx context.Context, run string, since int64, fn func(*events.Event) error) error {
	r, err := b.Root.Open(run)
	if err != nil {
		return err
	}
	c, err := events.Read(r.EventsPath(), since)
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		e, err := c.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
}

// Watch implements Backend with events.Watch (fsnotify and a rescan).
func (b FileBackend) Watch(ctx context.Context, run string, after int64) (Waiter, error) {
	r, err := b.Root.Open(run)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(r.EventsPath()); err != nil {
		return nil, err
	}
	return &fileWaiter{b: b, run: run, after: after, w: r.Watch()}, nil
}

// fileWaiter turns events.Watcher's hints into Backend.Watch's promise:
// the first Wait returns at once when the log is already past after.
type fileWaiter struct {
	b     FileBackend
	run   string
	after int64
	w     interface {
		Wait(context.Context) error
		Close() error
	}
	checked bool
}

func (f *fileWaiter) Wait(ctx context.Context) error {
	if !f.checked {
		f.checked = true
		if h, err := f.b.Head(ctx, f.run); err == nil && h > f.after {
			return nil
		}
	}
	return f.w.Wait(ctx)
}

func (f *fileWaiter) Close() error { return f.w.Close() }
