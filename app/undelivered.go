package app

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/supervise"
	"github.com/crew-dev/crew/task"
)

// DefaultUndeliveredAfter is how long a message sent to a worker may
// stay undelivered before the leader's pending, task show and the
// dashboard list it (Undelivered), unless told otherwise.
const DefaultUndeliveredAfter = 2 * time.Minute

// Undelivered is a message sent to a worker that has not reached its
// agent (no moment, wake, inbox or MCP call delivered it) for longer
// than the reader's limit, with the likely reason in words for the
// leader: {"kind":"undelivered","message":{...},"reason":"..."}.
type Undelivered struct {
	Kind    string         `json:"kind"` // "undelivered", beside the leader's pending's other kinds
	Message events.Message `json:"message"`
	Reason  string         `json:"reason"`
}

// undeliveredAfter parses a request's undelivered-after duration ("":
// DefaultUndeliveredAfter).
func undeliveredAfter(s string) (time.Duration, error) {
	if s == "" {
		return DefaultUndeliveredAfter, nil
	}
	return ParseDuration(s)
}

// undelivered lists the messages sent to the tasks of st that have not
// ended (only task only, when not "") and are still pending after
// after, oldest first, each with the likely reason (undeliveredReason).
// When st is the run's whole state (run.Run.State), its open messages are
// used, else they are read; live is what each task is doing
// (supervise.Liveness).
func undelivered(r *run.Run, st *state.State, live map[string]*run.Liveness, after time.Duration, only string) ([]Undelivered, error) {
	now := time.Now()
	tasks := map[string]bool{}
	open := st // with every open message, once read; else Pending reads each task's
	if only != "" {
		tasks[only] = true
	} else {
		if !open.Whole() {
			var err error
			if open, err = r.State(); err != nil {
				return nil, err
			}
		}
		for _, o := range open.Open {
			if o.Task != "" && o.Status == events.StatusPending && now.Sub(o.SentAt.Time) >= after {
				tasks[o.Task] = true
			}
		}
	}
	var out []Undelivered
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range tasks {
			if !yield(id) {
				return
			}
		}
	}) {
		t := st.Tasks[id]
		if t == nil || t.Status.Terminal() {
			continue
		}
		p, err := r.PendingIn(open, id)
		if err != nil {
			return nil, err
		}
		for _, m := range p.Messages {
			if m.Status != events.StatusPending || now.Sub(m.SentAt.Time) < after {
				continue
			}
			out = append(out, Undelivered{Kind: "undelivered", Message: m, Reason: undeliveredReason(r, t, live[id], &m, now)})
		}
	}
	slices.SortStableFunc(out, func(a, b Undelivered) int { return int(a.Message.Seq - b.Message.Seq) })
	return out, nil
}

// undeliveredReason is the likely reason message m sent to task t (whose
// worker does what l says) has not been delivered, from what this
// machine knows of the worker and its agent's hooks
// (supervise.LastHook, supervise.HasWaiter).
func undeliveredReason(r *run.Run, t *state.Task, l *run.Liveness, m *events.Message, now time.Time) string {
	last := supervise.LastHook(r, t.ID)
	// A hook call after the message was sent had it to deliver (SentAt
	// is cut to the millisecond).
	sent := m.SentAt.Time.Add(time.Millisecond)
	switch {
	case l != nil && l.State == run.LiveDead:
		return "its worker is dead: its process is gone"
	case t.Status == task.Waiting:
		return "its worker waits for your answer to its question (crew respond " + t.ID + ")"
	case t.Status == task.Pending:
		return "the task has not been started"
	case last.IsZero():
		return "no hook of its agent was ever called for this task: the agent was not set up (crew setup) or runs no hooks, and sees messages only when it calls crew inbox"
	case last.Before(sent) && !supervise.HasWaiter(r, t.ID):
		return fmt.Sprintf("its worker is idle (no hook called for %s) and no wake hook waits for it: crew setup claude registers one; a finished claude -p cannot be woken", roundSeconds(now.Sub(last)))
	case last.Before(sent):
		return fmt.Sprintf("a wake hook waits for it, yet no hook was called for %s: the agent's session may be gone", roundSeconds(now.Sub(last)))
	case m.Kind == events.KindFollowUp:
		return "a follow-up waits for the worker's next stop; its agent's hooks ran since it was sent"
	}
	return fmt.Sprintf("its agent's hooks ran since (last %s ago), but none delivered it", roundSeconds(now.Sub(last)))
}

// roundSeconds is d in whole seconds, as the reasons say it ("2m5s").
func roundSeconds(d time.Duration) string { return d.Round(time.Second).String() }

// UndeliveredIn is ListUndelivered over st, a whole state of run r the
// caller has read (run.Run.State), with live, what each of its tasks is
// doing (supervise.Liveness), and after, how long a message may stay
// undelivered (0: DefaultUndeliveredAfter): a page that shows the tasks
// as well reads the run and its workers' heartbeats once. Errors are
// those of reading the run.
func UndeliveredIn(r *run.Run, st *state.State, live map[string]*run.Liveness, after time.Duration) ([]Undelivered, error) {
	if after <= 0 {
		after = DefaultUndeliveredAfter
	}
	return undelivered(r, st, live, after, "")
}

// ListUndelivered is the request of ListUndelivered.
type ListUndelivered struct {
	Run   string `json:"run,omitempty" jsonschema:"the run id (default: the identity's, else the most recently created run)"`
	After string `json:"after,omitempty" jsonschema:"list a message not delivered for this duration (default 2m)"`
}

// ListUndelivered lists the messages sent to the run's workers and not
// delivered for longer than req.After (default DefaultUndeliveredAfter),
// oldest first, each with the likely reason, as the leader's Pending
// does (Open.Undelivered); it records nothing (no reaping of lost
// workers: crew serve reaps on its own). Errors: crew.ErrInvalid for a
// bad duration, those of opening and reading the run.
func (a *App) ListUndelivered(ctx context.Context, req ListUndelivered) ([]Undelivered, error) {
	after, err := undeliveredAfter(req.After)
	if err != nil {
		return nil, err
	}
	r, err := a.Run(req.Run)
	if err != nil {
		return nil, err
	}
	st, err := r.State()
	if err != nil {
		return nil, err
	}
	return undelivered(r, st, supervise.Liveness(r, st, 0, time.Now()), after, "")
}
