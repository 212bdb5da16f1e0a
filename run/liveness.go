package run

import (
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

// LivenessOf is the rule of docs/concepts.md, Liveness: what task t is
// doing at now, or nil when it is not Underway. It is LiveDead when gone
// (its supervised worker, recorded as running, is known to be gone:
// package supervise tells), LiveWaiting when it waits for an answer,
// else LiveWorking or LiveQuiet by its last sign of life
// (LastSignOfLife, with beat its last heartbeat, zero for none) and
// quietAfter (DefaultQuietAfter when 0). It reads nothing:
// supervise.Liveness gathers gone and beat for every task of a run.
func LivenessOf(t *state.Task, gone bool, beat time.Time, quietAfter time.Duration, now time.Time) *Liveness {
	if quietAfter <= 0 {
		quietAfter = DefaultQuietAfter
	}
	if !Underway(t) {
		return nil
	}
	w := t.Live()
	l := &Liveness{}
	if w != nil {
		l.PID = w.PID
	}
	switch {
	case w != nil && gone:
		l.State, l.Since = LiveDead, w.StartedAt
	case t.Status == task.Waiting && t.QuestionAt != nil:
		l.State, l.Since, l.Question = LiveWaiting, *t.QuestionAt, t.Question
	default:
		l.Since = LastSignOfLife(t, beat)
		l.State = LiveWorking
		if now.Sub(l.Since.Time) > quietAfter {
			l.State = LiveQuiet
		}
	}
	return l
}

// Underway reports whether task t is one whose liveness is told: it has
// not ended, and has started or been given a worker.
func Underway(t *state.Task) bool {
	return !t.Status.Terminal() && (t.Status != task.Pending || t.Live() != nil)
}

// LastSignOfLife is the latest of: the last event t's worker wrote
// (state.Task.LastSeenAt), its start, its worker process's start, and
// beat, its last heartbeat (zero for none; supervise.Heartbeat).
func LastSignOfLife(t *state.Task, beat time.Time) events.Time {
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
	if !beat.IsZero() {
		later(&events.Time{Time: beat.UTC().Truncate(time.Millisecond)})
	}
	return last
}
