// Package commit is crew's commit engine: the one loop by which an
// operation (a store.Change) becomes the next event of a run's log,
// whichever store keeps the log. Both stores commit through it: the file
// store (store/file) under its run lock, a batch of operations at a
// time (group commit), and the NATS store (store/nats) one operation at
// a time, racing other writers on the server.
//
// The loop (Engine.Commit), for a batch of operations:
//
//  1. Load the state at the end of the log, as far as the store knows
//     it (Tail.Load).
//  2. Validate each operation against it (or against the state its
//     caller read, brought up to the same end: Tail.CatchUp), stamp its
//     event with the run, the next seq and the time, and apply it to the
//     state, so that the next operation sees it. An operation refused,
//     cancelled or with nothing to write takes no seq.
//  3. Append the events with the seq the log must still end at
//     (Tail.Append: compare-and-swap). The file store holds its run
//     lock, so the log cannot have moved; the NATS server checks
//     Nats-Expected-Last-Subject-Sequence. A store that lost the race
//     (crew.ErrConflict), or a refusal met on a state that was not known
//     to be the log's end, loads the state again (Tail.Behind) and
//     validates again: Validate has no effects of its own.
//  4. From the append on the operations are committed. Hand what their
//     events ask of the mail tree (state.Effect, as mailbox.Act) and the
//     state after them to the store's projector (Tail.Project), which
//     writes the projections: best effort, since the next writer catches
//     up what a crash leaves behind.
//
// The last event of a batch is applied to the state only once it is
// appended, so that a batch of one that lost the race leaves the state
// as it was, and the store reads only what the winner appended.
//
// A store provides only the Tail: the end of its log, an append with a
// compare-and-swap on the last seq, and its projector. Rules (what an
// operation may do) live in the operations' Validate and in package
// state; the engine decides none.
package commit

import (
	"context"
	"errors"
	"fmt"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
)

// An Op is one operation to commit and, once Engine.Commit returns, its
// outcome: its event (stamped, appended) or why it was not committed
// (Validate's error, its context's, or the batch's). An Op whose
// Validate had nothing to write has neither.
type Op struct {
	Ctx    context.Context // a cancelled operation is not committed
	Change store.Change
	Event  *events.Event
	Err    error
}

// A Tail is the end of one run's log as a store holds it, for one call of
// Engine.Commit: all the engine asks of a store.
type Tail interface {
	// Load returns the state to validate against: at the end of the log
	// as far as the store knows it, tracking every open message when
	// open is set (it may track them anyway). current reports that it
	// is known to be the log's end (a store under its lock loaded it
	// there); a state that is not may be behind, and a refusal met on
	// it is checked again on a current one. An error (a damaged log,
	// say) fails the batch.
	Load(ctx context.Context, open bool) (st *state.State, current bool, err error)
	// Behind tells the store that the state Load returned is behind the
	// log's end; dirty, that it also holds events that were not
	// appended. The next Load reads the log again.
	Behind(dirty bool)
	// CatchUp brings view, a state its caller read from this log before
	// (store.Change.View), up to the end Load returned.
	CatchUp(ctx context.Context, view *state.State) error
	// Append appends evs, stamped with seqs last+1, last+2, …, and
	// lines, their events.Marshal lines one after another, durably, if
	// and only if the log still ends at seq last; else it returns an
	// error wrapping crew.ErrConflict and appends nothing.
	Append(ctx context.Context, last int64, evs []*events.Event, lines []byte) error
	// Project hands the projector what was committed: st, the state
	// after evs (the events appended, none when every operation was
	// refused), and acts, what they ask of the mail tree. It is called
	// once per batch that did not fail.
	Project(ctx context.Context, st *state.State, evs []*events.Event, acts []mailbox.Act)
}

// An Engine commits the operations of one run.
type Engine struct {
	Run string // the run's id, stamped on every event
	// Fresh marks the batch's own deliveries as the first copies of
	// their messages (mailbox.Act.Fresh): true for a store under whose
	// lock no other writer projects the same events (the file store's),
	// false where another writer may deliver them first (NATS).
	Fresh bool
}

// Commit validates, stamps, appends and applies ops, in order, as one
// batch through t, and hands the projector what was committed (see the
// package doc). Each Op's outcome is in it. The error is the batch's
// (Load's, Append's), which every operation not refused before it also
// carries. ctx bounds the store's work (a lock wait, a read); each Op's
// own context only whether it is committed. A batch of more than one
// operation must be loaded current (a store that batches holds a lock):
// only a batch of one is tried again.
func (e Engine) Commit(ctx context.Context, t Tail, ops []*Op) error {
	open := false
	for _, o := range ops {
		open = open || o.Change.View() == nil && o.Change.Open()
	}
	for {
		st, current, err := t.Load(ctx, open)
		if err != nil {
			return e.fail(ops, err)
		}
		b := e.validate(ctx, t, st, ops)
		if !current && len(ops) == 1 && ops[0].Event == nil && ops[0].Ctx.Err() == nil {
			// Refused, or nothing to do, on what this process last saw:
			// the log may have moved on since. Look.
			t.Behind(false)
			continue
		}
		if len(b.evs) == 0 {
			t.Project(ctx, st, nil, nil)
			return nil
		}
		err = t.Append(ctx, b.last, b.evs, b.lines)
		if errors.Is(err, crew.ErrConflict) && len(ops) == 1 {
			// Another writer took the seq: validate again against
			// what it wrote.
			t.Behind(false)
			continue
		}
		if err != nil {
			t.Behind(len(b.evs) > 1)
			return e.fail(ops, err)
		}
		// Committed.
		err = b.flush(st, e.Fresh)
		if err != nil {
			// An event the state cannot apply is in the log: the state
			// says so, as a reader of the log would see it.
			st.Damage = append(st.Damage, err.Error())
		}
		t.Project(ctx, st, b.evs, b.acts)
		if err != nil {
			t.Behind(true)
		}
		return nil
	}
}

// fail gives err to every operation that was not refused on its own.
func (e Engine) fail(ops []*Op, err error) error {
	for _, o := range ops {
		if o.Err == nil {
			o.Event, o.Err = nil, err
		}
	}
	return err
}

// A batch is what validate made of the operations: the events to append
// after seq last and their lines, what the events applied so far ask of
// the mail tree, and the last event, not yet applied.
type batch struct {
	last  int64
	evs   []*events.Event
	lines []byte
	acts  []mailbox.Act
	next  *pending
}

// pending is a validated event not yet applied: to the state, and to
// the view its operation validated against (nil for the state itself).
type pending struct {
	op   *Op
	view *state.State
	at   int // where its line starts in batch.lines
}

// validate validates each operation in order against st (or its view),
// each seeing the events of those before it, and stamps its event as the
// next seq. A refused operation keeps its error in Op.Err.
func (e Engine) validate(ctx context.Context, t Tail, st *state.State, ops []*Op) *batch {
	b := &batch{last: st.Seq}
	for _, o := range ops {
		o.Event, o.Err = nil, nil
		if err := b.flush(st, e.Fresh); err != nil {
			b.refuseNext(err)
		}
		target := st
		if view := o.Change.View(); view != nil {
			if o.Err = t.CatchUp(ctx, view); o.Err != nil {
				continue
			}
			for _, ev := range b.evs {
				view.Apply(ev)
			}
			target = view
		}
		if o.Err = o.Ctx.Err(); o.Err != nil {
			// Cancelled (Ctrl-C) while waiting for the lock: the user
			// was told nothing was done, so nothing is.
			continue
		}
		ev, err := o.Change.Validate(target)
		if err != nil || ev == nil {
			o.Err = err
			continue
		}
		ev.Stamp(e.Run, b.last+int64(len(b.evs))+1)
		line, err := events.Marshal(ev)
		if err != nil {
			o.Err = fmt.Errorf("commit to run %s: %w", e.Run, err)
			continue
		}
		o.Event = ev
		b.next = &pending{op: o, at: len(b.lines)}
		if target != st {
			b.next.view = target
		}
		b.evs = append(b.evs, ev)
		b.lines = append(b.lines, line...)
	}
	return b
}

// flush applies the pending event, if any, to the state and its view,
// and adds what it asks of the mail tree to the batch's acts. An event
// the state cannot apply is an error, and leaves st.Seq where it was.
func (b *batch) flush(st *state.State, fresh bool) error {
	p := b.next
	if p == nil {
		return nil
	}
	b.next = nil
	seq := st.Seq
	effects, err := st.Apply(p.op.Event)
	if err != nil {
		st.Seq = seq
		b.next = p // for refuseNext
		return err
	}
	if p.view != nil {
		side, _ := p.view.Apply(p.op.Event)
		effects = mailbox.KnownCopies(effects, side)
	}
	b.acts = mailbox.AppendActs(b.acts, effects, fresh)
	return nil
}

// refuseNext refuses the pending operation whose event flush could not
// apply, before it is appended: its event and line leave the batch, and
// its seq stays free (no gap).
func (b *batch) refuseNext(err error) {
	p := b.next
	p.op.Event, p.op.Err = nil, err
	b.evs = b.evs[:len(b.evs)-1]
	b.lines = b.lines[:p.at]
	b.next = nil
}
