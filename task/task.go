package task

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/looplab/fsm"

	"github.com/crew-dev/crew"
)

// State is the status of a task, as stored in the log and shown in
// --json output ("status").
type State string

// The task states of docs/state-machine.md. Completed, Failed and Cancelled are terminal.
const (
	Pending   State = "pending"   // added, not started
	Running   State = "running"   // started by its worker
	Waiting   State = "waiting"   // its worker asked and waits for a response
	Completed State = "completed" // done; final
	Failed    State = "failed"    // gave up; may be retried
	Cancelled State = "cancelled" // stopped by the leader; may be retried
)

// States lists every state, in the order of docs/state-machine.md. Do not modify it.
var States = []State{Pending, Running, Waiting, Completed, Failed, Cancelled}

// Terminal reports whether s is completed, failed or cancelled: a task in
// such a state takes no steer, follow-up, nudge or report (docs/state-machine.md) and
// counts as ended for run wait.
func (s State) Terminal() bool {
	switch s {
	case Completed, Failed, Cancelled:
		return true
	}
	return false
}

// valid reports whether s is one of States.
func (s State) valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// ParseState returns the State named s. Names are exact and lower case
// ("running", not "Running"). An unknown name returns an error wrapping
// crew.ErrInvalid that quotes s and lists the valid states.
func ParseState(s string) (State, error) {
	if st := State(s); st.valid() {
		return st, nil
	}
	return "", fmt.Errorf("invalid task state %q: states are %s: %w", s, join(States), crew.ErrInvalid)
}

// Op is an operation that changes a task's state; its value is the fsm
// event name and the word the log and messages use.
type Op string

// The operations of docs/state-machine.md, each with the states it leads from and to.
const (
	Start      Op = "start"       // pending -> running
	Ask        Op = "ask"         // running -> waiting
	Respond    Op = "respond"     // waiting -> running
	AskTimeout Op = "ask-timeout" // waiting -> running
	Complete   Op = "complete"    // running -> completed
	Fail       Op = "fail"        // pending|running|waiting -> failed
	Cancel     Op = "cancel"      // pending|running|waiting -> cancelled
	Retry      Op = "retry"       // failed|cancelled -> pending
	// Restart puts back to pending a task whose supervised worker exited
	// while crew spawn --retries has attempts left, so the next attempt
	// starts it again; one event, so the task is never seen terminal in
	// between (run wait would end).
	Restart Op = "restart" // running|waiting -> pending
)

// Ops lists every operation, in the order of docs/state-machine.md; Allowed returns ops
// in this order. Do not modify it.
var Ops = []Op{Start, Ask, Respond, AskTimeout, Complete, Fail, Cancel, Retry, Restart}

// valid reports whether op is one of Ops.
func (op Op) valid() bool {
	for _, v := range Ops {
		if op == v {
			return true
		}
	}
	return false
}

// events is the transition table of docs/state-machine.md in looplab/fsm's form, built
// once. It carries no callbacks: a machine built from it only answers
// "where does this event lead".
var events = fsm.Events{
	{Name: string(Start), Src: []string{string(Pending)}, Dst: string(Running)},
	{Name: string(Ask), Src: []string{string(Running)}, Dst: string(Waiting)},
	{Name: string(Respond), Src: []string{string(Waiting)}, Dst: string(Running)},
	{Name: string(AskTimeout), Src: []string{string(Waiting)}, Dst: string(Running)},
	{Name: string(Complete), Src: []string{string(Running)}, Dst: string(Completed)},
	{Name: string(Fail), Src: []string{string(Pending), string(Running), string(Waiting)}, Dst: string(Failed)},
	{Name: string(Cancel), Src: []string{string(Pending), string(Running), string(Waiting)}, Dst: string(Cancelled)},
	{Name: string(Retry), Src: []string{string(Failed), string(Cancelled)}, Dst: string(Pending)},
	{Name: string(Restart), Src: []string{string(Running), string(Waiting)}, Dst: string(Pending)},
}

// machine returns a fresh fsm standing at from. It is cheap (a few small
// maps) and never shared, so callers need no locking.
func machine(from State) *fsm.FSM {
	return fsm.NewFSM(string(from), events, nil)
}

// Next returns the state that op leads to from state from, for the task
// named id (id is used only in error messages).
//
// A transition docs/state-machine.md does not allow returns a *TransitionError, which
// wraps crew.ErrConflict. An unknown from or op returns an error wrapping
// crew.ErrInvalid.
func Next(id string, from State, op Op) (State, error) {
	if !from.valid() {
		return "", fmt.Errorf("task %s: invalid task state %q: states are %s: %w", id, from, join(States), crew.ErrInvalid)
	}
	if !op.valid() {
		return "", fmt.Errorf("task %s: invalid operation %q: operations are %s: %w", id, op, join(Ops), crew.ErrInvalid)
	}
	m := machine(from)
	if err := m.Event(context.Background(), string(op)); err != nil {
		var refused fsm.InvalidEventError
		if errors.As(err, &refused) {
			return "", &TransitionError{Task: id, State: from, Op: op}
		}
		// Unreachable: the table has no callbacks and no self-transitions.
		return "", fmt.Errorf("task %s: %s from %s: %w", id, op, from, err)
	}
	return State(m.Current()), nil
}

// Allowed returns the ops allowed from state from, in Ops order: exactly
// the ops for which Next succeeds. It returns an empty slice for completed
// and for an unknown state.
func Allowed(from State) []Op {
	if !from.valid() {
		return nil
	}
	m := machine(from)
	var ops []Op
	for _, op := range Ops {
		if m.Can(string(op)) {
			ops = append(ops, op)
		}
	}
	return ops
}

// TransitionError is the refusal of op on task Task in state State. It
// wraps crew.ErrConflict (exit 3). Its message names the task, its state
// and what would work instead, for example
//
//	task t1 is running, not waiting; use follow-up or steer
type TransitionError struct {
	Task  string // task id
	State State  // the task's current state
	Op    Op     // the refused operation
}

// Error returns the message of docs/state-machine.md: lower case, no final period, ready
// to be prefixed with "crew: ".
func (e *TransitionError) Error() string {
	id, s := e.Task, e.State
	switch s {
	case Completed:
		return fmt.Sprintf("task %s is completed, which is final; nothing can change it", id)
	case Failed, Cancelled:
		if e.Op != Retry {
			return fmt.Sprintf("task %s is %s; use crew task retry %s to run it again", id, s, id)
		}
	}
	switch e.Op {
	case Start:
		if s != Pending {
			return fmt.Sprintf("task %s is %s, not pending; it has already started", id, s)
		}
	case Ask:
		switch s {
		case Waiting:
			return fmt.Sprintf("task %s is waiting, not running; it already has an open question (crew await QUESTION_ID waits for the answer)", id)
		case Pending:
			return fmt.Sprintf("task %s is pending, not running; start it before asking (crew task start %s)", id, id)
		}
	case Respond:
		switch s {
		case Running:
			return fmt.Sprintf("task %s is running, not waiting; use follow-up or steer", id)
		case Pending:
			return fmt.Sprintf("task %s is pending, not waiting; it has no open question, so use follow-up or steer", id)
		}
	case AskTimeout:
		if s != Waiting {
			return fmt.Sprintf("task %s is %s, not waiting; there is no question to time out", id, s)
		}
	case Complete:
		switch s {
		case Pending:
			return fmt.Sprintf("task %s is pending, not running; start it first (crew task start %s)", id, id)
		case Waiting:
			return fmt.Sprintf("task %s is waiting, not running; its open question needs a response first (crew respond %s BODY)", id, id)
		}
	case Restart:
		if s == Pending {
			return fmt.Sprintf("task %s is pending, not running or waiting; it has not started, so there is nothing to restart", id)
		}
	case Retry:
		if s != Failed && s != Cancelled {
			return fmt.Sprintf("task %s is %s, not failed or cancelled; only a failed or cancelled task can be retried", id, s)
		}
	}
	// Reached only for a TransitionError built by hand for a pair that is
	// allowed, or with an unknown state or op.
	return fmt.Sprintf("task %s is %s; %s is not allowed now (allowed: %s)", id, s, e.Op, allowedText(s))
}

// Unwrap returns crew.ErrConflict, so errors.Is(err, crew.ErrConflict)
// holds for every refused transition.
func (e *TransitionError) Unwrap() error { return crew.ErrConflict }

// allowedText lists Allowed(s) for a message, or "none".
func allowedText(s State) string {
	ops := Allowed(s)
	if len(ops) == 0 {
		return "none"
	}
	return join(ops)
}

// join lists states or ops separated by ", ".
func join[T ~string](xs []T) string {
	ss := make([]string, len(xs))
	for i, x := range xs {
		ss[i] = string(x)
	}
	return strings.Join(ss, ", ")
}
