package supervise

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crew-dev/crew"
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
	var beats map[string]time.Time
	for id, t := range st.Tasks {
		if !run.Underway(t) {
			continue
		}
		if beats == nil {
			beats = lastBeats(r)
		}
		w := t.Live()
		out[id] = run.LivenessOf(t, w != nil && Gone(w), beats[id], quietAfter, now)
	}
	return out
}

// TasksAlive reads r's tasks after recording the deaths of lost workers
// (Reap), with what each task that has not ended is doing (Liveness).
func TasksAlive(ctx context.Context, r *run.Run, quietAfter time.Duration) (*state.State, map[string]*run.Liveness, error) {
	return alive(ctx, r, r.TaskState, quietAfter)
}

// StateAlive is TasksAlive with r's whole state, its open messages too
// (run.Run.State): a caller that needs both reads the run once.
func StateAlive(ctx context.Context, r *run.Run, quietAfter time.Duration) (*state.State, map[string]*run.Liveness, error) {
	return alive(ctx, r, r.State, quietAfter)
}

func alive(ctx context.Context, r *run.Run, read func() (*state.State, error), quietAfter time.Duration) (*state.State, map[string]*run.Liveness, error) {
	st, err := reapRead(ctx, r, read)
	if err != nil {
		return nil, nil, err
	}
	return st, Liveness(r, st, quietAfter, time.Now()), nil
}

// beatFile is the heartbeat file of task id: TASK.alive in the run's
// workers directory (run.Run.WorkersDir), beside the worker logs.
func beatFile(dir, id string) string { return filepath.Join(dir, id+beatSuffix) }

const beatSuffix = ".alive"

// lastBeats returns the modification time of each heartbeat file of r,
// by task id (none when r has no workers directory): one listing of the
// directory, and a stat(2) of each heartbeat file in it, not one of
// every task's name (a run of 1,000 tasks without workers costs one
// listing, not 1,000 failed stats).
func lastBeats(r *run.Run) map[string]time.Time {
	beats := map[string]time.Time{}
	dir, err := r.WorkersDir(false)
	if err != nil {
		return beats
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return beats
	}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), beatSuffix)
		if !ok {
			continue
		}
		if fi, err := os.Stat(beatFile(dir, id)); err == nil {
			beats[id] = fi.ModTime()
		}
	}
	return beats
}

// Heartbeat records a sign of life of task id's worker without writing
// to r's log: it sets the modification time of the task's heartbeat
// file, workers/TASK.alive beside the worker logs (WorkerLog). It is
// cheap: one utimes(2) once the file exists, whatever the run's size,
// since only a known task has one (crew spawn, the hook and Heartbeat
// make it for a task they found). The first time, it reads the run's
// tasks to check that task id is one, then creates the file. An unknown
// task is crew.ErrNotFound; an id that is not one, crew.ErrInvalid. (On
// a file system that ignores letter case, an id that differs from a
// task's only in case names that task's file: such ids may not coexist,
// docs/concepts.md, Identifiers.)
func Heartbeat(r *run.Run, id string) error {
	if err := crew.ValidateID("task", id); err != nil {
		return err
	}
	if touched, err := touchBeat(r, id); touched || err != nil {
		return err
	}
	st, err := r.TaskState()
	if err != nil {
		return err
	}
	if _, err := st.Task(id); err != nil {
		return err
	}
	return createBeat(r, id)
}

// touchBeat sets the modification time of task id's heartbeat file to
// now, if it exists: touched says it did.
func touchBeat(r *run.Run, id string) (touched bool, err error) {
	dir, err := r.WorkersDir(false)
	if err != nil {
		return false, err
	}
	err = touch(beatFile(dir, id), time.Now())
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// createBeat makes the heartbeat file of task id, known to exist, with
// the workers directory if need be.
func createBeat(r *run.Run, id string) error {
	dir, err := r.WorkersDir(true)
	if err != nil {
		return err
	}
	f, err := createFile(r, beatFile(dir, id))
	if err != nil {
		return err
	}
	return f.Close()
}

// heartbeat is Heartbeat for a task known to exist.
func heartbeat(r *run.Run, id string) error {
	if touched, err := touchBeat(r, id); touched || err != nil {
		return err
	}
	return createBeat(r, id)
}

// Alive is a heartbeat for the commands a worker runs (inbox, pending,
// ack, the agent hook): best effort, an error is dropped, since the
// command itself is what the worker wanted. Unless create, it only
// touches a heartbeat file that exists (made by crew spawn, crew
// heartbeat or the hook), so that a command that is refused, or that
// reads only, creates no file (docs/guarantees.md). It reports whether
// the heartbeat was recorded.
func Alive(r *run.Run, id string, create bool) bool {
	if create {
		return heartbeat(r, id) == nil
	}
	touched, _ := touchBeat(r, id)
	return touched
}
