package state

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/crew-dev/crew/events"
)

// Concerns names whom a commit wakes: a worker for its task's events and
// the messages it receives, the leader for what is sent to it and for
// tasks' changes, nobody else.
func TestConcerns(t *testing.T) {
	bcast, _ := json.Marshal(broadcastData{Recipients: []string{"t1", "t2"}})
	for _, c := range []struct {
		name string
		e    events.Event
		want []string
	}{
		{"response to t1", events.Event{Type: events.TaskResponded, Task: "t1", Message: &events.Message{To: "t1", Direction: events.Inbox}}, []string{"t1", Leader}},
		{"steer to t1", events.Event{Type: events.MessageSent, Task: "t1", Message: &events.Message{To: "t1", Direction: events.Steering}}, []string{"t1"}},
		{"question of t2", events.Event{Type: events.TaskWaiting, Task: "t2", Message: &events.Message{To: "leader", Direction: events.Outbox}}, []string{"t2", Leader}},
		{"report of t2", events.Event{Type: events.MessageSent, Task: "t2", Message: &events.Message{To: "leader", Direction: events.Outbox}}, []string{"t2", Leader}},
		{"t1 reads", events.Event{Type: events.MessageDelivered, Task: "t1", MessageIDs: []string{"m"}}, []string{"t1"}},
		{"broadcast", events.Event{Type: events.MessageSent, Message: &events.Message{To: events.Broadcast, Direction: events.Inbox}, Data: bcast}, []string{"t1", "t2"}},
		{"t3 cancelled", events.Event{Type: events.TaskCancelled, Task: "t3"}, []string{"t3", Leader}},
		{"stop asked", events.Event{Type: events.WorkerStopAsked, Task: "t3"}, []string{"t3", Leader}},
		{"run created", events.Event{Type: events.RunCreated}, nil},
	} {
		if got := Concerns(&c.e); !slices.Equal(got, c.want) {
			t.Errorf("%s: Concerns = %q; want %q", c.name, got, c.want)
		}
	}
}
