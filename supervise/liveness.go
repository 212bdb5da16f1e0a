package supervise

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
)

// Liveness tells, for every task of st (read from r) that has not ended
// and has been started or given a worker, what it is doing at now, by
// run.LivenessOf (docs/concepts.md, Liveness) with the facts only this
// machine can tell: whether its supervised worker is gone (Gone) and
// its last heartbeat (Heartbeat). quietAfter is run.DefaultQuietAfter
// when 0. Pending tasks without a worker are left out.
func Liveness(r *run.Run, st *state.State, quietAfter time.Duration, now time.Time) map[string]*run.Liveness {
	out := map[string]*run.Liveness{}
	for id, t := range st.Tasks {
		if !run.Underway(t) {
			continue
		}
		w := t.Live()
		out[id] = run.LivenessOf(t, w != nil && Gone(w), lastBeat(r, id), quietAfter, now)
	}
	return out
}

// TasksAlive reads r's tasks after recording the deaths of lost workers
// (Reap), with what each task that has not ended is doing (Liveness).
func TasksAlive(ctx context.Context, r *run.Run, quietAfter time.Duration) (*state.State, map[string]*run.Liveness, error) {
	st, err := reapState(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	return st, Liveness(r, st, quietAfter, time.Now()), nil
}

// beatFile is the heartbeat file of task id: TASK.alive in the run's
// workers directory (run.Run.WorkersDir), beside the worker logs.
func beatFile(dir, id string) string { return filepath.Join(dir, id+".alive") }

// lastBeat is the modification time of task id's heartbeat file, zero
// when it has none.
func lastBeat(r *run.Run, id string) time.Time {
	dir, err := r.WorkersDir(false)
	if err != nil {
		return time.Time{}
	}
	fi, err := os.Stat(beatFile(dir, id))
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// Heartbeat records a sign of life of task id's worker without writing
// to r's log: it sets the modification time of the task's heartbeat
// file, workers/TASK.alive beside the worker logs (WorkerLog). It is
// cheap (one utimes(2), or a create the first time). An unknown task is
// crew.ErrNotFound.
func Heartbeat(r *run.Run, id string) error {
	st, err := r.TaskState()
	if err != nil {
		return err
	}
	if _, err := st.Task(id); err != nil {
		return err
	}
	return heartbeat(r, id)
}

// heartbeat is Heartbeat for a task known to exist.
func heartbeat(r *run.Run, id string) error {
	dir, err := r.WorkersDir(false)
	if err != nil {
		return err
	}
	err = touch(beatFile(dir, id), time.Now())
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if dir, err = r.WorkersDir(true); err != nil {
		return err
	}
	f, err := createFile(r, beatFile(dir, id))
	if err != nil {
		return err
	}
	return f.Close()
}

// Alive is a heartbeat for the commands a worker runs (inbox, pending,
// ack, the agent hook): best effort, an error is dropped, since the
// command itself is what the worker wanted. Unless create, it only
// touches a heartbeat file that exists (made by crew spawn, crew
// heartbeat or the hook), so that a command that is refused, or that
// reads only, creates no file (docs/guarantees.md).
func Alive(r *run.Run, id string, create bool) {
	if create {
		heartbeat(r, id)
		return
	}
	if dir, err := r.WorkersDir(false); err == nil {
		touch(beatFile(dir, id), time.Now())
	}
}
