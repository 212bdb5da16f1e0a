package supervise

import (
	"context"
	"os/exec"
	"syscall"
	"time"

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
	wt := r.Watch()
	defer wt.Close()
	for {
		if a := stopAsked(r, id, attempt); a != nil {
			asked <- a
			return
		}
		// The watch wakes on every commit; the poll bounds a missed
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

// stopWorker stops cmd, which done says has exited: SIGTERM to its
// process group (or to it alone, on a terminal), then, if it or another
// process of its group is still there after grace, SIGKILL to them.
func stopWorker(cmd *exec.Cmd, done <-chan struct{}, grace time.Duration, reason string) *state.Stopped {
	s := &state.Stopped{PID: cmd.Process.Pid, Group: ownGroup(cmd), Signals: []string{"SIGTERM"}, GraceMs: grace.Milliseconds(), Reason: reason}
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
			return s
		}
		if done == nil && !(s.Group && groupAlive(s.PID)) {
			return s
		}
	}
}
