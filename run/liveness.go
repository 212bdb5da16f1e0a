package run

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// DefaultQuietAfter is how long a running task may show no sign of life
// before it counts as quiet (--quiet-after).
const DefaultQuietAfter = 5 * time.Minute

// What a task that has not ended is doing, as Liveness tells it
// (docs/concepts.md, Liveness).
const (
	LiveWorking = "working" // a sign of life within the quiet-after span
	LiveQuiet   = "quiet"   // no sign of life for longer
	LiveWaiting = "waiting" // its worker waits for an answer
	LiveDead    = "dead"    // its supervised worker's process is gone
)

// Liveness is what a task that has not ended is doing: LiveWorking, LiveQuiet,
// LiveWaiting or LiveDead, since when, and for LiveWaiting on which question; PID
// is its supervised worker's, when it has one.
type Liveness struct {
	State    string      `json:"state"`
	Since    events.Time `json:"since"` // the last sign of life (working, quiet), the question (waiting), the worker's start (dead)
	Question string      `json:"question,omitempty"`
	PID      int         `json:"pid,omitempty"`
}

// Liveness tells, for every task of st that has not ended and has been
// started or given a worker, what it is doing at now: LiveDead when its
// supervised worker is recorded as running on this machine but is gone
// (gone), LiveWaiting when it waits for an answer, else LiveWorking or LiveQuiet by
// its last sign of life (LastSignOfLife) and quietAfter
// (DefaultQuietAfter when 0). Pending tasks without a worker are left
// out.
func (r *Run) Liveness(st *state.State, quietAfter time.Duration, now time.Time) map[string]*Liveness {
	if quietAfter <= 0 {
		quietAfter = DefaultQuietAfter
	}
	out := map[string]*Liveness{}
	for id, t := range st.Tasks {
		w := t.Live()
		if t.Status.Terminal() || (t.Status == task.Pending && w == nil) {
			continue
		}
		l := &Liveness{}
		if w != nil {
			l.PID = w.PID
		}
		switch {
		case w != nil && gone(w):
			l.State, l.Since = LiveDead, w.StartedAt
		case t.Status == task.Waiting && t.QuestionAt != nil:
			l.State, l.Since, l.Question = LiveWaiting, *t.QuestionAt, t.Question
		default:
			l.Since = r.LastSignOfLife(t)
			l.State = LiveWorking
			if now.Sub(l.Since.Time) > quietAfter {
				l.State = LiveQuiet
			}
		}
		out[id] = l
	}
	return out
}

// LastSignOfLife is the latest of: the last event t's worker wrote
// (state.Task.LastSeenAt), its start, its worker process's start, and
// its last heartbeat (Heartbeat).
func (r *Run) LastSignOfLife(t *state.Task) events.Time {
	last := t.CreatedAt
	later := func(at *events.Time) {
		if at != nil && at.After(last.Time) {
			last = *at
		}
	}
	later(t.LastSeenAt)
	later(t.StartedAt)
	if w := t.Live(); w != nil {
		later(&w.StartedAt)
	}
	if dir, err := r.workersDir(false); err == nil {
		if fi, err := os.Stat(filepath.Join(dir, t.ID+".alive")); err == nil {
			later(&events.Time{Time: fi.ModTime().UTC().Truncate(time.Millisecond)})
		}
	}
	return last
}

// Heartbeat records a sign of life of task id's worker without writing
// to the log: it sets the modification time of the task's heartbeat
// file, workers/TASK.alive beside the worker logs (WorkerLog). It is
// cheap (one utimes(2), or a create the first time). An unknown task is
// crew.ErrNotFound.
func (r *Run) Heartbeat(id string) error {
	st, err := r.TaskState()
	if err != nil {
		return err
	}
	if _, err := st.Task(id); err != nil {
		return err
	}
	return r.heartbeat(id)
}

// heartbeat is Heartbeat for a task known to exist.
func (r *Run) heartbeat(id string) error {
	dir, err := r.workersDir(false)
	if err != nil {
		return err
	}
	err = touch(filepath.Join(dir, id+".alive"), time.Now())
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if dir, err = r.workersDir(true); err != nil {
		return err
	}
	f, err := r.createFile(filepath.Join(dir, id+".alive"))
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
func (r *Run) Alive(id string, create bool) {
	if create {
		r.heartbeat(id)
		return
	}
	if dir, err := r.workersDir(false); err == nil {
		touch(filepath.Join(dir, id+".alive"), time.Now())
	}
}

// TasksAlive reads the tasks after recording the deaths of lost workers
// (Reap), with what each task that has not ended is doing (Liveness).
func (r *Run) TasksAlive(ctx context.Context, quietAfter time.Duration) (*state.State, map[string]*Liveness, error) {
	st, err := r.reapState(ctx)
	if err != nil {
		return nil, nil, err
	}
	return st, r.Liveness(st, quietAfter, time.Now()), nil
}
