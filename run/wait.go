package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/state"
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

func (r *Run) awaitFrom(ctx context.Context, q *events.Message) (*events.Message, error) {
	w := r.Watch()
	defer w.Close()
	for {
		// Each pass re-reads from the question on: cheap (binary search to
		// the question, then only what came after it).
		m, err := r.answer(q.ID, q.Task, q.Seq)
		if err != nil || m != nil {
			return m, err
		}
		if err := w.Wait(ctx); err != nil {
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
		m, terr := r.AskTimedOut(context.WithoutCancel(ctx), q.Task, q.ID, o.From)
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

// WaitRun blocks until every task is terminal. It returns nil when all
// completed, an error wrapping crew.ErrIncomplete when any failed or was
// cancelled, crew.ErrTimeout at ctx's deadline. A run with no tasks has
// nothing to wait for: nil at once. A damaged log is crew.ErrDamaged at
// once, as for every reader: what the tasks will do cannot be told from
// a log that cannot be read whole. progress, if not nil, is called with
// the state each time it may have changed (its tasks only, as TaskState
// reads it), and once before either error.
func (r *Run) WaitRun(ctx context.Context, progress func(*state.State)) error {
	w := r.Watch()
	defer w.Close()
	for {
		st, err := r.TaskState()
		if err != nil {
			return err
		}
		if progress != nil {
			progress(st)
		}
		if err := st.Err(); err != nil {
			return err
		}
		if len(st.Tasks) == 0 {
			return nil
		}
		done, failed := 0, 0
		for _, t := range st.Tasks {
			if t.Status.Terminal() {
				done++
				if t.Status != task.Completed {
					failed++
				}
			}
		}
		if done == len(st.Tasks) {
			if failed > 0 {
				return fmt.Errorf("%d of %s did not complete: %w", failed, human.Count(done, "task"), crew.ErrIncomplete)
			}
			return nil
		}
		if err := w.Wait(ctx); err != nil {
			return ctxErr(err, "waiting for run "+r.ID())
		}
	}
}
