package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/internal/tail"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// The operations on a task's supervised workers (docs/concepts.md,
// Supervised workers): what a worker's start and exit do to the task.
// The processes themselves (starting, waiting, signals, the tests of a
// pid, heartbeats, worker logs) are package supervise's, which calls
// these.

// reasonTail is how much of a worker's output a task's reason quotes,
// in bytes (worker.exited keeps CheckTail).
const reasonTail = 1024

// Spawnable returns task id of st when a worker may be started for it:
// it exists (else crew.ErrNotFound), has not ended and has no worker
// recorded as running (else crew.ErrConflict, naming the worker's pid).
func Spawnable(st *state.State, id string) (*state.Task, error) {
	t, err := st.Task(id)
	if err != nil {
		return nil, err
	}
	if t.Status.Terminal() {
		hint := ""
		if t.Status != task.Completed {
			hint = fmt.Sprintf(" (crew task retry %s reopens it)", t.ID)
		}
		return nil, fmt.Errorf("task %s is %s; no worker is started for it%s: %w", t.ID, t.Status, hint, crew.ErrConflict)
	}
	if w := t.Live(); w != nil {
		return nil, fmt.Errorf("task %s already has a worker: pid %d on %s (attempt %d, started %s); two workers on one task would do its work twice: %w",
			t.ID, w.PID, w.Host, w.Attempt, w.StartedAt, crew.ErrConflict)
	}
	return t, nil
}

// WorkerStarted records worker.started for task id: w, a process that
// now runs its worker (attempt, pid, start time, host, supervisor). It
// is refused as Spawnable refuses (another worker was recorded
// meanwhile, or the task ended): the caller then stops the process.
func (r *Run) WorkerStarted(ctx context.Context, id string, w *state.Worker) error {
	_, err := r.commit(ctx, func(st *state.State) (*events.Event, error) {
		t, err := Spawnable(st, id)
		if err != nil {
			return nil, err
		}
		return &events.Event{Type: events.WorkerStarted, Task: t.ID, Actor: t.Agent, Data: state.WorkerData(w)}, nil
	})
	return err
}

// WorkerExited records that task id's worker attempt x.Attempt ended, as
// x says (worker.exited), unless that is already recorded (another
// process found it gone first). A task that has not ended fails, with
// the reason and the end of x.Tail (and the event carries a failure
// message to the leader that quotes them, notice.go), or with restart
// goes back to pending for the next attempt (task.Restart). why, when not empty, replaces the
// start of the reason ("worker exited with status 2"). Errors: an
// unknown task (crew.ErrNotFound), the store's.
func (r *Run) WorkerExited(ctx context.Context, id string, x *state.WorkerExit, restart bool, why string) error {
	noticeID, err := newNoticeID()
	if err != nil {
		return err
	}
	_, err = r.commit(ctx, func(st *state.State) (*events.Event, error) {
		t, err := st.Task(id)
		if err != nil {
			return nil, err
		}
		if w := t.Live(); w == nil || w.Attempt != x.Attempt {
			return nil, nil
		}
		ev := &events.Event{Type: events.WorkerExited, Task: t.ID, Actor: state.CrewActor, Data: state.WorkerData(x)}
		if t.Status.Terminal() {
			return ev, nil
		}
		if why == "" {
			why = "worker " + x.Describe()
		}
		op := task.Fail
		ev.Reason = why + tailReason(x.Tail)
		restart = restart && x.Stopped == nil // a stopped worker is not started again
		if restart {
			op = task.Restart
			ev.Reason = fmt.Sprintf("%s; starting attempt %d", why, x.Attempt+1)
		}
		if restart && t.Status == task.Pending {
			return ev, nil // not started yet: it stays pending for the next attempt
		}
		next, err := task.Next(t.ID, t.Status, op)
		if err != nil {
			return nil, err
		}
		ev.From, ev.To = string(t.Status), string(next)
		if op == task.Fail {
			ev.Message = failureNotice(noticeID, st, t, ev.Reason) // the leader is told (notice.go)
		}
		return ev, nil
	})
	return err
}

// AskStop records worker.stop_asked for task id: a request that the
// supervisor of its live worker (the crew spawn that started it, on the
// worker's machine) stop it (state.StopAsk; docs/concepts.md, Stopping
// workers), with reason, by actor. A task ended by anyone other than its
// worker needs none: the event that ended it asks already. It returns
// the worker asked to stop, or nil when the task has no live worker or
// its stop was asked already (no event is written then). Errors: an
// unknown task (crew.ErrNotFound), the store's.
func (r *Run) AskStop(ctx context.Context, id, actor, reason string) (*state.Worker, error) {
	var asked *state.Worker
	_, err := r.commit(ctx, func(st *state.State) (*events.Event, error) {
		t, err := st.Task(id)
		if err != nil {
			return nil, err
		}
		w := t.Live()
		if w == nil || w.Stop != nil {
			return nil, nil
		}
		asked = w
		return &events.Event{Type: events.WorkerStopAsked, Task: t.ID, Actor: actor, Reason: reason, Data: state.StopAskData(w.Attempt)}, nil
	})
	if err != nil {
		return nil, err
	}
	return asked, nil
}

// tailReason is the end of a worker's output as a reason quotes it:
// "\nits output ended with:\n…" (so a reason's first line says what happened), or "" for no output.
func tailReason(out string) string {
	out = strings.TrimRight(out, "\n")
	if out == "" {
		return ""
	}
	if len(out) > reasonTail {
		b := &tail.Buffer{Max: reasonTail}
		b.Write([]byte(out))
		out = "…" + b.String()
	}
	return "\nits output ended with:\n" + out
}

// WorkersDir returns the directory of the files the run's workers leave
// on this machine, which are no facts of the run and write no event:
// their logs and heartbeats (package supervise) and the agent hook's
// stop count (StopBlocks). It is workers/ in the run's directory, or,
// for a run on a server (no run directory), in the user's cache
// directory ($XDG_CACHE_HOME/crew/runs/RUN/workers) on the machine that
// calls it (docs/files.md). With create it is made when missing, with
// the root's modes (Root.Perm) whatever the umask.
func (r *Run) WorkersDir(create bool) (string, error) {
	base := r.Dir()
	perm := r.root.Perm()
	if base == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("no directory for worker logs of run %s: %w", r.ID(), err)
		}
		base = filepath.Join(cache, "crew", "runs", r.ID())
		if create {
			if err := os.MkdirAll(base, perm.Dir); err != nil {
				return "", err
			}
		}
	}
	dir := filepath.Join(base, "workers")
	if create {
		err := fsys.Mkdir(dir, perm.Dir)
		if err == nil {
			err = os.Chmod(dir, perm.Dir) // the documented mode, whatever the umask (docs/files.md, Permissions)
		}
		if err != nil && !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	return dir, nil
}
