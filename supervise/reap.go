package supervise

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/crew-dev/crew/internal/proc"
	"github.com/crew-dev/crew/internal/tail"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
)

// Reap finds the workers of st's tasks (st read from r) that are
// recorded as running on this machine but whose process is gone (its
// pid no longer alive, or now another process: its start time differs,
// or the machine rebooted) while the crew spawn that watched it is gone
// too, and records each exit as unknown (run.Run.WorkerExited), failing
// its task if it had not ended; what such a worker left running in its
// process group is killed (SIGKILL: no one is left to wait a grace). It returns how many it recorded. A
// worker on another machine is left to crew commands run there.
func Reap(ctx context.Context, r *run.Run, st *state.State) (int, error) {
	return reap(ctx, r, st, nil)
}

// reap is Reap, leaving out the tasks skip names (those whose exits
// AwaitStopped records itself).
func reap(ctx context.Context, r *run.Run, st *state.State, skip map[string]*orphan) (int, error) {
	n := 0
	for _, t := range st.TaskList() {
		w := t.Live()
		if w == nil || skip[t.ID] != nil || !Gone(w) {
			continue
		}
		// What the worker left in its process group has no one to end
		// it: killed here (the group's id is the worker's pid, which the
		// kernel does not hand out again while the group has a process).
		if groupAlive(w.PID) {
			signalWorker(w.PID, true, syscall.SIGKILL)
		}
		x := &state.WorkerExit{Attempt: w.Attempt, PID: w.PID, Unknown: true, Tail: tail.File(w.Log, 0, run.CheckTail)}
		why := fmt.Sprintf("worker process %d is gone; crew spawn (pid %d), which watched it, died before it, so its exit status is unknown", w.PID, w.Supervisor)
		if err := r.WorkerExited(ctx, t.ID, x, false, why); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Gone reports whether worker w, recorded as running, is known to have
// ended without its crew spawn recording it: both processes are on this
// machine, and neither runs any more (proc.ID.Alive: the pid, its start
// time and the boot). While crew spawn lives, it records the exit
// itself.
func Gone(w *state.Worker) bool {
	if host, _ := os.Hostname(); w.Host != host {
		return false
	}
	if (proc.ID{PID: w.Supervisor, Start: w.SupervisorStart, Boot: w.Boot}).Alive() {
		return false
	}
	return !(proc.ID{PID: w.PID, Start: w.Start, Boot: w.Boot}).Alive()
}

// reapState is r's TaskState after Reap: the tasks with the deaths of
// lost workers recorded. A failure to record one (a read-only state
// root) is not an error here: Liveness still shows such a worker dead.
func reapState(ctx context.Context, r *run.Run) (*state.State, error) {
	return reapRead(ctx, r, r.TaskState)
}

// reapRead is reapState with the state read by read (r.TaskState, or
// r.State for its open messages too): read again only when Reap
// recorded a death.
func reapRead(ctx context.Context, r *run.Run, read func() (*state.State, error)) (*state.State, error) {
	st, err := read()
	if err != nil || st.Err() != nil {
		return st, err
	}
	if n, err := Reap(ctx, r, st); n == 0 || err != nil {
		return st, nil
	}
	return read()
}

// ReapRoot is Reap over every run of root that has a worker recorded as
// running on this machine: what crew serve does periodically, so that a
// task whose worker and crew spawn both died moves to failed with no
// command run. It returns how many exits it recorded. A run that cannot
// be read (damaged, or its manifest unreadable) is skipped, its error
// joined to the one returned, after the other runs are reaped.
func ReapRoot(ctx context.Context, root *run.Root) (int, error) {
	ms, _, err := root.List()
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, m := range ms {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		r, err := root.Open(m.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		st, err := r.TaskState()
		if err != nil || st.Err() != nil || !hasLive(st) {
			continue
		}
		k, err := Reap(ctx, r, st)
		n += k
		if err != nil {
			errs = append(errs, fmt.Errorf("reap run %s: %w", m.ID, err))
		}
	}
	return n, errors.Join(errs...)
}

// hasLive reports whether a task of st has a worker recorded as running.
func hasLive(st *state.State) bool {
	for _, t := range st.Tasks {
		if t.Live() != nil {
			return true
		}
	}
	return false
}
