package run

import (
	"testing"
	"time"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// TestLivenessOf: the rule of docs/concepts.md, Liveness, from a task's
// state and the two facts supervise gathers (gone, the last heartbeat).
func TestLivenessOf(t *testing.T) {
	at := func(min int) *events.Time {
		return &events.Time{Time: time.Date(2026, 1, 2, 3, min, 0, 0, time.UTC)}
	}
	worker := []state.Worker{{Attempt: 1, PID: 42, StartedAt: *at(1)}}
	now := at(20).Time
	for _, c := range []struct {
		name  string
		t     state.Task
		gone  bool
		beat  *events.Time
		state string // "" for none
		since *events.Time
	}{
		{name: "pending", t: state.Task{Status: task.Pending, CreatedAt: *at(0)}},
		{name: "completed", t: state.Task{Status: task.Completed, CreatedAt: *at(0), Workers: worker}},
		{name: "pending with a worker", t: state.Task{Status: task.Pending, CreatedAt: *at(0), Workers: worker}, state: LiveQuiet, since: at(1)},
		{name: "working", t: state.Task{Status: task.Running, CreatedAt: *at(0), StartedAt: at(2), LastSeenAt: at(18)}, state: LiveWorking, since: at(18)},
		{name: "quiet", t: state.Task{Status: task.Running, CreatedAt: *at(0), StartedAt: at(2)}, state: LiveQuiet, since: at(2)},
		{name: "a heartbeat", t: state.Task{Status: task.Running, CreatedAt: *at(0), StartedAt: at(2)}, beat: at(19), state: LiveWorking, since: at(19)},
		{name: "waiting", t: state.Task{Status: task.Waiting, CreatedAt: *at(0), StartedAt: at(2), Question: "q1", QuestionAt: at(3)}, state: LiveWaiting, since: at(3)},
		{name: "dead", t: state.Task{Status: task.Waiting, CreatedAt: *at(0), QuestionAt: at(3), Workers: worker}, gone: true, state: LiveDead, since: at(1)},
		{name: "gone without a worker", t: state.Task{Status: task.Running, CreatedAt: *at(0), StartedAt: at(17)}, gone: true, state: LiveWorking, since: at(17)},
	} {
		var beat time.Time
		if c.beat != nil {
			beat = c.beat.Time
		}
		l := LivenessOf(&c.t, c.gone, beat, 0, now)
		switch {
		case c.state == "" && l != nil:
			t.Errorf("%s: liveness %+v, want none", c.name, l)
		case c.state == "":
		case l == nil || l.State != c.state || !l.Since.Equal(c.since.Time):
			t.Errorf("%s: liveness %+v, want %s since %s", c.name, l, c.state, c.since)
		}
	}
}
