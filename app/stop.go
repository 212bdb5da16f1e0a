package app

import (
	"context"
	"errors"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/supervise"
	"github.com/crew-dev/crew/task"
)

// RunStop is the request of RunStop.
type RunStop struct {
	Run    string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Reason string `json:"reason,omitempty" jsonschema:"why, recorded in each task it cancels (default: run stopped)"`
	As     string `json:"-"`
}

// RunStopped is what RunStop did: the tasks it cancelled, and the
// workers it had stopped, each with how it exited (state.WorkerExit,
// whose Stopped says what its crew spawn signalled), or none when it
// still runs (Running).
type RunStopped struct {
	Run       string          `json:"run"`
	Cancelled []string        `json:"cancelled"`
	Workers   []StoppedWorker `json:"workers"`
	Running   []string        `json:"running,omitempty"` // tasks whose workers still run
}

// StoppedWorker is one worker RunStop had stopped: its task, and the
// worker's record (state.Worker: pid, host, exit).
type StoppedWorker struct {
	Task string `json:"task"`
	state.Worker
}

// stopMargin is how long RunStop waits for the workers' exits beyond
// the longest grace among them: time for a crew spawn to see its stop
// asked in the log, and, on a server, for the exits to come back.
const stopMargin = 10 * time.Second

// RunStop ends a run's work (docs/concepts.md, Stopping workers): it
// cancels every task that has not ended (reason req.Reason, else "run
// stopped"), which asks each task's worker to stop, asks the stop of
// every other worker still running (a worker whose task ended without
// it exiting: run.Run.AskStop), and waits until every worker's exit is
// recorded (supervise.AwaitStopped: each crew spawn stops its worker,
// on its own machine; a worker of this machine whose crew spawn is gone
// is stopped here), for at most the longest grace among them and a
// margin. It acts as the run's leader (req.As, else the identity's).
// Errors: crew.ErrTimeout, with the record, when workers still run
// then; the store's.
func (a *App) RunStop(ctx context.Context, req RunStop) (*RunStopped, error) {
	r, actor, err := a.leader(req.Run, req.As)
	if err != nil {
		return nil, err
	}
	reason := req.Reason
	if reason == "" {
		reason = "run stopped"
	}
	st, err := r.TaskState()
	if err != nil {
		return nil, err
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	rec := &RunStopped{Run: r.ID(), Cancelled: []string{}, Workers: []StoppedWorker{}}
	stopping := map[string]int{} // task -> attempt
	for _, t := range st.TaskList() {
		if !t.Status.Terminal() {
			_, err := r.Transition(ctx, t.ID, task.Cancel, actor, reason, nil)
			if err != nil && !errors.Is(err, crew.ErrConflict) { // ended meanwhile: nothing to cancel
				return nil, err
			}
			if err == nil {
				rec.Cancelled = append(rec.Cancelled, t.ID)
			}
		}
		if w := t.Live(); w != nil {
			stopping[t.ID] = w.Attempt
			if _, err := r.AskStop(ctx, t.ID, actor, reason); err != nil {
				return nil, err
			}
		}
	}
	return rec, a.awaitStopped(ctx, r, st, stopping, rec)
}

// awaitStopped waits for the workers RunStop asked to stop (stopping:
// task -> attempt, of st) and fills rec with how they ended.
func (a *App) awaitStopped(ctx context.Context, r *run.Run, st *state.State, stopping map[string]int, rec *RunStopped) error {
	bound := time.Duration(0)
	for id := range stopping {
		bound = max(bound, st.Tasks[id].Live().GraceOf())
	}
	wctx, cancel := context.WithTimeout(ctx, bound+stopMargin)
	defer cancel()
	running, err := supervise.AwaitStopped(wctx, r)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for _, t := range running {
		rec.Running = append(rec.Running, t.ID)
	}
	after, rerr := r.TaskState()
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	for _, t := range after.TaskList() {
		if n, ok := stopping[t.ID]; ok && n <= len(t.Workers) {
			rec.Workers = append(rec.Workers, StoppedWorker{Task: t.ID, Worker: t.Workers[n-1]})
		}
	}
	return err
}
