package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
	"github.com/crew-dev/crew/task"
)

// FindMessage returns a message of the run by id, scanning the log.
// Unknown is crew.ErrNotFound; an id that is no UUID crew.ErrInvalid. It
// reads the whole log: for lookups such as await, not for hot paths.
func (r *Run) FindMessage(id string) (*events.Message, error) {
	if _, err := uuidCheck(id); err != nil {
		return nil, err
	}
	var found *events.Message
	err := r.scan(0, func(e *events.Event) error {
		if e.Message != nil && e.Message.ID == id {
			found = e.Message
			return events.ErrStopScan
		}
		return nil
	})
	if err == nil && found == nil {
		err = fmt.Errorf("no message %s in run %s: %w", id, r.ID(), crew.ErrNotFound)
	}
	return found, err
}

// Await blocks until the question is answered and returns the response.
// It serves a worker that restarted while waiting: if the answer already
// came, it returns at once. A question that timed out is crew.ErrTimeout;
// one whose task ended is crew.ErrConflict; ctx's deadline is
// crew.ErrTimeout, its cancellation ctx.Err().
func (r *Run) Await(ctx context.Context, questionID string) (*events.Message, error) {
	q, err := r.FindMessage(questionID)
	if err != nil {
		return nil, err
	}
	if q.Kind != events.KindQuestion {
		return nil, fmt.Errorf("message %s is a %s, not a question: %w", questionID, q.Kind, crew.ErrInvalid)
	}
	return r.awaitFrom(ctx, q)
}

// awaitFrom is Await for question q. A question asked with a deadline
// (state.Ask) is waited for until then at most: once it has passed, the
// question is answered by its default, or times out without one
// (askTimedOut), whoever awaits it and whenever (a worker that restarts
// after the deadline gets the default at once).
func (r *Run) awaitFrom(ctx context.Context, q *events.Message) (*events.Message, error) {
	a := state.AskOf(q)
	wctx := ctx
	if a != nil {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(ctx, a.Deadline.Time)
		defer cancel()
	}
	// Everything that ends the wait concerns the question's task: its
	// answer, its timeout, its end (state.Concerns).
	w := r.Watch(q.Task)
	defer w.Close()
	hinter, _ := w.(store.Hinter)
	for {
		// A wake-up that names its event (NATS) is looked at first: the
		// log after the question can be long (every other waiter's
		// question), and the answer is most often that event. Whatever
		// it holds, the pass below reads as without it.
		if hinter != nil {
			if h := hinter.Hint(); h > q.Seq {
				if m, err := r.answer(q.ID, q.Task, h-1); err != nil || m != nil {
					return m, err
				}
			}
		}
		// Each pass re-reads from the question on: cheap (binary search to
		// the question, then only what came after it).
		m, err := r.answer(q.ID, q.Task, q.Seq)
		if err != nil || m != nil {
			return m, err
		}
		if a != nil && !time.Now().Before(a.Deadline.Time) {
			m, err := r.askTimedOut(context.WithoutCancel(ctx), q.Task, q.ID, q, q.From, a.Default)
			if err == nil && m == nil {
				err = fmt.Errorf("question %s timed out unanswered at its deadline, %s: %w", q.ID, a.Deadline, crew.ErrTimeout)
			}
			return m, err
		}
		if err := w.Wait(wctx); err != nil && ctx.Err() != nil {
			return nil, ctxErr(err, "waiting for a response to "+q.ID)
		}
	}
}

// ctxErr maps a context error: a deadline is crew.ErrTimeout.
func ctxErr(err error, doing string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("timed out %s: %w", doing, crew.ErrTimeout)
	}
	return err
}

// Ask sends a question from a task's worker. With wait, it then blocks
// until the leader responds and returns the response; if ctx's deadline
// passes first, the task goes back to running (task.ask_timed_out) and the
// error wraps crew.ErrTimeout. Without wait it returns (question, nil).
func (r *Run) Ask(ctx context.Context, o SendOptions, wait bool) (question, response *events.Message, err error) {
	o.Kind = events.KindQuestion
	// The send must not be cut short by the wait's deadline.
	q, err := r.Send(context.WithoutCancel(ctx), o)
	if err != nil || !wait {
		return q, nil, err
	}
	m, err := r.awaitFrom(ctx, q)
	if err != nil && errors.Is(err, crew.ErrTimeout) && ctx.Err() != nil {
		m, terr := r.askTimedOut(context.WithoutCancel(ctx), q.Task, q.ID, q, o.From, nil)
		if terr != nil {
			return q, nil, terr
		}
		if m != nil {
			return q, m, nil // answered in the last moment
		}
		return q, nil, err
	}
	return q, m, err
}

// Ended reports whether every task of st has ended (is terminal), and
// when so and some did not complete, returns an error wrapping
// crew.ErrIncomplete that names them with the first line of their
// reason: the outcome of waiting for a run (supervise.WaitRun).
func Ended(st *state.State) (bool, error) {
	for _, t := range st.Tasks {
		if !t.Status.Terminal() {
			return false, nil
		}
	}
	var failed []string
	for _, t := range st.TaskList() {
		if t.Status != task.Completed {
			why, _, _ := strings.Cut(t.Reason, "\n")
			if why != "" {
				why = " (" + why + ")"
			}
			failed = append(failed, fmt.Sprintf("%s %s%s", t.ID, t.Status, why))
		}
	}
	if len(failed) > 0 {
		return true, fmt.Errorf("%d of %s did not complete: %s: %w", len(failed), human.Count(len(st.Tasks), "task"), strings.Join(failed, "; "), crew.ErrIncomplete)
	}
	return true, nil
}

// NudgeQuiet nudges, as the leader, each running task of st whose
// worker has shown no sign of life for after (when positive; live is
// what each task is doing, supervise.Liveness of st) and has not been
// nudged since its last one: once per quiet spell, however often it is
// called (state.Task.NudgedAt, in the log, remembers). It returns how
// many it nudged.
func (r *Run) NudgeQuiet(ctx context.Context, st *state.State, live map[string]*Liveness, after time.Duration) (int, error) {
	n := 0
	if after <= 0 {
		return n, nil
	}
	for _, t := range st.TaskList() {
		l := live[t.ID]
		if l == nil || (l.State != LiveWorking && l.State != LiveQuiet) || time.Since(l.Since.Time) < after {
			continue
		}
		if t.NudgedAt != nil && !t.NudgedAt.Before(l.Since.Time) {
			continue // nudged in this quiet spell already
		}
		_, err := r.Send(ctx, SendOptions{Kind: events.KindNudge, Task: t.ID, From: r.Manifest.Leader})
		switch {
		case err == nil:
			n++
		case !errors.Is(err, crew.ErrConflict): // (conflict: it ended meanwhile)
			return n, err
		}
	}
	return n, nil
}
