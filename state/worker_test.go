package state

import (
	"encoding/json"
	"testing"

	"github.com/crew-dev/crew/events"
)

// The rule of a worker's stop (StopAsk): a task ended by anyone other
// than its worker asks its live worker to stop; a worker that ends its
// own task is not stopped; worker.stop_asked asks for a task that ended;
// a worker whose exit is recorded is asked nothing.
func TestStopAsked(t *testing.T) {
	cases := []struct {
		name  string
		ends  *events.Event // after task.started and worker.started
		then  *events.Event
		by    string // the StopAsk's By, "" for none
		why   string
		alive bool // the worker has not exited before ends
	}{
		{name: "cancelled by the leader", ends: ev(events.TaskCancelled, "leader", "running", "cancelled"), by: "leader", why: "task cancelled", alive: true},
		{name: "failed by the leader", ends: ev(events.TaskFailed, "lead", "running", "failed"), by: "lead", why: "task failed", alive: true},
		{name: "completed by the leader", ends: ev(events.TaskCompleted, "leader", "running", "completed"), by: "leader", why: "task completed", alive: true},
		{name: "completed by its worker", ends: ev(events.TaskCompleted, "a1", "running", "completed"), alive: true},
		{name: "completed by its worker, in another letter case", ends: ev(events.TaskCompleted, "A1", "running", "completed"), alive: true},
		{name: "completed by its worker, then run stop", ends: ev(events.TaskCompleted, "a1", "running", "completed"),
			then: &events.Event{Type: events.WorkerStopAsked, Actor: "leader", Reason: "run stopped", Data: StopAskData(1)}, by: "leader", why: "run stopped", alive: true},
		{name: "cancelled after its worker exited", ends: ev(events.TaskCancelled, "leader", "running", "cancelled")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := New()
			spec, _ := json.Marshal(TaskSpec{Agent: "a1"})
			w := WorkerData(&Worker{Attempt: 1, PID: 42, Host: "h", Command: []string{"sh"}})
			code := 0
			seq := []*events.Event{
				{Type: events.RunCreated, Data: json.RawMessage(`{"id":"r1","leader":"lead"}`)},
				{Type: events.TaskCreated, Task: "t1", To: "pending", Data: spec},
				ev(events.TaskStarted, "a1", "pending", "running"),
				{Type: events.WorkerStarted, Task: "t1", Actor: "a1", Data: w},
			}
			if !c.alive {
				seq = append(seq, &events.Event{Type: events.WorkerExited, Task: "t1", Actor: CrewActor, Data: WorkerData(&WorkerExit{Attempt: 1, PID: 42, Code: &code})})
			}
			seq = append(seq, c.ends)
			if c.then != nil {
				c.then.Task = "t1"
				seq = append(seq, c.then)
			}
			for i, e := range seq {
				e.Seq, e.At = int64(i+1), events.Now()
				if _, err := st.Apply(e); err != nil {
					t.Fatal(err)
				}
			}
			got := st.Tasks["t1"].Workers[0].Stop
			switch {
			case c.by == "" && got != nil:
				t.Fatalf("stop asked by %s (%s), want none", got.By, got.Reason)
			case c.by != "" && got == nil:
				t.Fatalf("no stop asked, want one by %s", c.by)
			case c.by != "" && (got.By != c.by || got.Reason != c.why):
				t.Fatalf("stop asked by %s (%s), want by %s (%s)", got.By, got.Reason, c.by, c.why)
			}
		})
	}
}

// ev is a transition of task t1 by actor.
func ev(typ, actor, from, to string) *events.Event {
	return &events.Event{Type: typ, Task: "t1", Actor: actor, From: from, To: to}
}
