package supervise

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/internal/proc"
	"github.com/crew-dev/crew/internal/tail"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
)

// Stopping workers (docs/concepts.md, Stopping workers): the crew spawn
// that started a worker is the one process that stops it, whoever asked
// and from whichever machine. The request is in the run's log
// (state.Worker.Stop, set by the event that ended the task or by
// worker.stop_asked); the supervisor watches the log and carries it out
// on its own machine, where the worker's process group is.

// superviseWorker waits for cmd, worker w of task id of r, to exit. It
// stops the worker (stopWorker) when the worker's stop is asked in the
// log or when ctx ends (crew spawn interrupted), and then returns how;
// nil when the worker exited on its own.
func superviseWorker(ctx context.Context, r *run.Run, id string, w *state.Worker, cmd *exec.Cmd, grace time.Duration) *state.Stopped {
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	asked := make(chan *state.StopAsk, 1)
	go watchStop(wctx, r, id, w.Attempt, asked)
	var reason string
	select {
	case <-done:
		endLeftovers(cmd, grace)
		return nil
	case <-ctx.Done():
		reason = "crew spawn was interrupted"
	case a := <-asked:
		reason = a.Reason
		if a.By != "" {
			reason += " by " + a.By
		}
	}
	return stopWorker(cmd, done, grace, reason)
}

// watchStop sends, once, the stop asked for attempt of task id on
// asked, watching r's log until ctx ends.
func watchStop(ctx context.Context, r *run.Run, id string, attempt int, asked chan<- *state.StopAsk) {
	wt := r.Watch(id) // a stop asked, its task's end: events of task id
	defer wt.Close()
	for {
		if a := stopAsked(r, id, attempt); a != nil {
			asked <- a
			return
		}
		// The watch wakes on every commit of the task; the poll bounds a missed
		// wake-up (a store's watch that was reconnecting).
		wctx, cancel := context.WithTimeout(ctx, poll)
		wt.Wait(wctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
	}
}

// stopAsked is the stop asked for attempt of task id of r, or nil.
func stopAsked(r *run.Run, id string, attempt int) *state.StopAsk {
	st, err := r.TaskState()
	if err != nil {
		return nil
	}
	if t := st.Tasks[id]; t != nil {
		for _, w := range t.Workers {
			if w.Attempt == attempt {
				return w.Stop
			}
		}
	}
	return nil
}

// endLeftovers ends what worker cmd, which has exited on its own, left
// running in its process group (a child it started in the background,
// a grandchild its shell did not wait for): SIGTERM to the group, then
// SIGKILL after grace to what is still there. A worker's processes end
// with it, so that a run stopped or ended leaves no process behind
// (docs/concepts.md, Stopping workers). It returns once the group is
// gone, at once when it is already.
func endLeftovers(cmd *exec.Cmd, grace time.Duration) {
	if !ownGroup(cmd) || !groupAlive(cmd.Process.Pid) {
		return
	}
	closed := make(chan struct{})
	close(closed)
	stopWorker(cmd, closed, grace, "")
}

// stopWorker stops cmd, which done says has exited: SIGTERM to its
// process group (or to it alone when it leads none: on a standard input
// that is no terminal with Terminal set), then, if it or another process
// of its group is still there after grace, SIGKILL to them. It returns
// once they have all exited (a zombie waiting for init counts as
// exited: proc.GroupAlive).
func stopWorker(cmd *exec.Cmd, done <-chan struct{}, grace time.Duration, reason string) *state.Stopped {
	s := &state.Stopped{PID: cmd.Process.Pid, Group: ownGroup(cmd), Signals: []string{"SIGTERM"}, GraceMs: grace.Milliseconds(), Reason: reason, By: "crew spawn"}
	stopGroup(cmd, syscall.SIGTERM)
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	// Once the worker has exited, a process it started in its group
	// may still be there: its group is looked at every tick.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			done = nil // exited: now only its group is waited for
		case <-tick.C:
		case <-deadline.C:
			s.Signals = append(s.Signals, "SIGKILL")
			stopGroup(cmd, syscall.SIGKILL)
			if done != nil {
				<-done
			}
			for i := 0; i < 40 && s.Group && groupAlive(s.PID); i++ {
				time.Sleep(25 * time.Millisecond) // its other processes, killed, until they are reaped
			}
			return s
		}
		if done == nil && !(s.Group && groupAlive(s.PID)) {
			return s
		}
	}
}

// AwaitStopped waits until no task of r has a live worker (one whose
// exit is not recorded), reaping the lost ones (Reap) as it goes, and
// returns nil then. Each worker's crew spawn stops it once its stop is
// asked in the log (run.Run.AskStop, or the event that ended its task);
// a worker whose crew spawn is gone has no one to do that, so a worker
// of this machine in that plight is stopped here, the same way (SIGTERM
// to its process group, SIGKILL after its grace), and its exit recorded
// here once it is gone (unknown, with how it was stopped, By "crew run
// stop"). When ctx ends first, it returns the tasks whose workers still
// run (on another machine whose crew spawn does not answer, or that
// outlived SIGKILL) and an error wrapping crew.ErrTimeout.
func AwaitStopped(ctx context.Context, r *run.Run) ([]*state.Task, error) {
	wt := r.Watch()
	defer wt.Close()
	orphans := map[string]*orphan{} // by task
	for {
		st, err := r.TaskState()
		if err != nil {
			return nil, err
		}
		if err := st.Err(); err != nil {
			return nil, err
		}
		// The orphans stopped here are recorded here, with how; Reap
		// leaves them out, however their deaths fall between the two.
		n, err := recordOrphans(ctx, r, orphans)
		if err != nil {
			return nil, err
		}
		reaped, err := reap(ctx, r, st, orphans)
		if err != nil {
			return nil, err
		}
		if n+reaped > 0 {
			if st, err = r.TaskState(); err != nil {
				return nil, err
			}
		}
		var live []*state.Task
		for _, t := range st.TaskList() {
			if w := t.Live(); w != nil {
				live = append(live, t)
				stopOrphan(orphans, t.ID, w)
			}
		}
		if len(live) == 0 {
			return nil, nil
		}
		wctx, cancel := context.WithTimeout(ctx, poll/4)
		wt.Wait(wctx)
		cancel()
		if ctx.Err() != nil {
			return live, fmt.Errorf("%s still running: %s: %w", human.Count(len(live), "worker"), describeLive(live), crew.ErrTimeout)
		}
	}
}

// orphan is a worker of this machine whose crew spawn is gone, which
// AwaitStopped stops itself: SIGTERM sent at termAt, and how (stopped).
type orphan struct {
	w       *state.Worker
	termAt  time.Time
	stopped *state.Stopped
}

// running reports whether the orphan, or a process of its group, has
// not exited.
func (o *orphan) running() bool {
	w := o.w
	return (proc.ID{PID: w.PID, Start: w.Start, Boot: w.Boot}).Alive() || o.stopped.Group && groupAlive(w.PID)
}

// stopOrphan starts stopping w, the live worker of task id, when it is
// an orphan: on this machine, alive, its crew spawn gone: SIGTERM to its
// process group (recordOrphans goes on).
func stopOrphan(orphans map[string]*orphan, id string, w *state.Worker) {
	if orphans[id] != nil {
		return
	}
	if host, _ := os.Hostname(); w.Host != host {
		return
	}
	if (proc.ID{PID: w.Supervisor, Start: w.SupervisorStart, Boot: w.Boot}).Alive() {
		return // its crew spawn stops it
	}
	if !(proc.ID{PID: w.PID, Start: w.Start, Boot: w.Boot}).Alive() {
		return // gone: Reap records it
	}
	group := w.Tmux == "" // a worker on a tmux window's terminal of an older crew leads no group
	orphans[id] = &orphan{w: w, termAt: time.Now(), stopped: &state.Stopped{PID: w.PID, Group: group, Signals: []string{"SIGTERM"},
		GraceMs: w.GraceOf().Milliseconds(), Reason: "its crew spawn was gone", By: "crew run stop"}}
	signalWorker(w.PID, group, syscall.SIGTERM)
}

// recordOrphans goes on stopping each orphan (stopOrphan): SIGKILL to
// one still running once its grace has passed since SIGTERM; and records
// the exit of each that is gone, group and all: unknown (no parent of
// it saw how it ended), with how it was stopped. It returns how many it
// recorded.
func recordOrphans(ctx context.Context, r *run.Run, orphans map[string]*orphan) (int, error) {
	n := 0
	for id, o := range orphans {
		w := o.w
		if o.running() {
			if len(o.stopped.Signals) == 1 && time.Since(o.termAt) >= w.GraceOf() {
				o.stopped.Signals = append(o.stopped.Signals, "SIGKILL")
				signalWorker(w.PID, o.stopped.Group, syscall.SIGKILL)
			}
			continue
		}
		x := &state.WorkerExit{Attempt: w.Attempt, PID: w.PID, Unknown: true, Tail: tail.File(w.Log, 0, run.CheckTail), Stopped: o.stopped}
		why := fmt.Sprintf("worker process %d was stopped by crew run stop, its crew spawn (pid %d) being gone", w.PID, w.Supervisor)
		if err := r.WorkerExited(ctx, id, x, false, why); err != nil {
			return n, err
		}
		delete(orphans, id)
		n++
	}
	return n, nil
}

// describeLive names the live workers of tasks live: "t1's (pid 42 on
// host)".
func describeLive(live []*state.Task) string {
	var b strings.Builder
	for i, t := range live {
		if i > 0 {
			b.WriteString(", ")
		}
		w := t.Live()
		fmt.Fprintf(&b, "%s's (pid %d on %s)", t.ID, w.PID, w.Host)
	}
	return b.String()
}
