package supervise

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// WaitRun blocks until every task of r is terminal: WaitRunWith with
// o.Progress = progress and the other options left at their defaults.
func WaitRun(ctx context.Context, r *run.Run, progress func(*state.State)) error {
	var o WaitOptions
	if progress != nil {
		o.Progress = func(st *state.State, _ map[string]*run.Liveness) { progress(st) }
	}
	return WaitRunWith(ctx, r, o)
}

// WaitOptions are the settings of WaitRunWith.
type WaitOptions struct {
	// Progress, if not nil, is called with the state (its tasks only, as
	// run.Run.TaskState reads it) and what each task that has not ended
	// is doing (Liveness), each time they may have changed, and once
	// before an error.
	Progress func(*state.State, map[string]*run.Liveness)
	// QuietAfter is Liveness's quiet-after span (run.DefaultQuietAfter when 0).
	QuietAfter time.Duration
	// NudgeAfter, when positive, nudges a running task whose worker has
	// shown no sign of life for that long, once per quiet spell: not
	// again until it shows one (run.Run.NudgeQuiet).
	NudgeAfter time.Duration
	// Failed, if not nil, is called once for each failure of a task the
	// wait sees, as it sees it (before Progress): each task failed when
	// the wait starts, then each that fails while it waits (again after
	// a retry), in task order.
	Failed func(*state.Task)
	// AllowEmpty makes a run with no tasks a success (nil at once);
	// without it, such a run is crew.ErrConflict: a CI job whose task
	// add failed must not pass for one whose tasks all completed.
	AllowEmpty bool
}

// poll is how often WaitRunWith looks at processes and clocks that do
// not write to the log: a supervised worker whose crew spawn died, quiet
// tasks to nudge.
const poll = time.Second

// WaitRunWith blocks until every task of r is terminal. It returns nil
// when all completed, an error wrapping crew.ErrIncomplete when any
// failed or was cancelled (run.Ended), crew.ErrTimeout at ctx's
// deadline. A run with no tasks is crew.ErrConflict at once ("run r1 has
// no tasks"), or nil with o.AllowEmpty. A damaged log is crew.ErrDamaged
// at once, as for every reader: what the tasks will do cannot be told
// from a log that cannot be read whole. Its verdict comes from the log,
// not from a snapshot: before it returns nil or crew.ErrIncomplete it
// reads the whole log (run.Run.ReadWhole), so that damage anywhere, also
// where a snapshot covers it, is crew.ErrDamaged. A supervised worker
// found gone (Reap) fails its task, which ends the wait like any
// failure.
func WaitRunWith(ctx context.Context, r *run.Run, o WaitOptions) error {
	w := r.Watch()
	defer w.Close()
	told := map[string]time.Time{} // task id -> the end of the failure told
	for {
		st, err := reapState(ctx, r)
		if err != nil {
			return err
		}
		live := Liveness(r, st, o.QuietAfter, time.Now())
		if o.Failed != nil {
			tellFailed(st, told, o.Failed)
		}
		if o.Progress != nil {
			o.Progress(st, live)
		}
		if err := st.Err(); err != nil {
			return err
		}
		if ended, _ := run.Ended(st); ended || len(st.Tasks) == 0 {
			// The snapshot says the wait is over: the log says how.
			if err, done := verdict(ctx, r, o); done {
				return err
			}
		}
		if _, err := r.NudgeQuiet(ctx, st, live, o.NudgeAfter); err != nil {
			return err
		}
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if o.NudgeAfter > 0 || len(live) > 0 {
			wctx, cancel = context.WithTimeout(ctx, poll)
		}
		err = w.Wait(wctx)
		cancel()
		if err != nil && ctx.Err() != nil {
			return ctxErr(ctx.Err(), "waiting for run "+r.ID())
		}
	}
}

// tellFailed calls failed with each task of st that failed and is not
// in told with the same end, and notes it there.
func tellFailed(st *state.State, told map[string]time.Time, failed func(*state.Task)) {
	for _, t := range st.TaskList() {
		if t.Status != task.Failed || t.EndedAt == nil || told[t.ID].Equal(t.EndedAt.Time) {
			continue
		}
		told[t.ID] = t.EndedAt.Time
		failed(t)
	}
}

// verdict is the outcome of waiting for run r, read from its whole log
// (run.Run.ReadWhole) once the snapshot says every task ended: damage, the
// run having no tasks (unless o.AllowEmpty), or run.Ended's. done is
// false when the log says some task has not ended after all (a snapshot
// ahead of what the log holds), and the wait goes on.
func verdict(ctx context.Context, r *run.Run, o WaitOptions) (err error, done bool) {
	st, err := r.ReadWhole(ctx)
	if err != nil {
		return err, true
	}
	if err := st.Err(); err != nil {
		return fmt.Errorf("run %s: %w", r.ID(), err), true
	}
	if len(st.Tasks) == 0 {
		if o.AllowEmpty {
			return nil, true
		}
		return fmt.Errorf("run %s has no tasks: nothing to wait for (--allow-empty makes that a success): %w", r.ID(), crew.ErrConflict), true
	}
	ended, err := run.Ended(st)
	return err, ended
}

// ctxErr maps a context error: a deadline is crew.ErrTimeout.
func ctxErr(err error, doing string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("timed out %s: %w", doing, crew.ErrTimeout)
	}
	return err
}

// WaitEnded blocks until every task of r has ended (run.Ended; a run
// with no tasks has not), reaping lost workers as it goes, or until ctx
// ends (ctx's error). crew spawn in a tmux window waits so, after its
// worker exited, to keep the window open until the run ends. A damaged
// log is its error (crew.ErrDamaged).
func WaitEnded(ctx context.Context, r *run.Run) error {
	w := r.Watch()
	defer w.Close()
	for {
		st, err := reapState(ctx, r)
		if err != nil {
			return err
		}
		if err := st.Err(); err != nil {
			return err
		}
		if ended, _ := run.Ended(st); ended && len(st.Tasks) > 0 {
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, poll)
		w.Wait(wctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
