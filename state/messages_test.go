package state

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/crew-dev/crew/events"
)

func TestMessageUpdates(t *testing.T) {
	at := events.Now()
	for _, c := range []struct {
		name string
		e    events.Event
		want []MessageUpdate
	}{
		{"delivered to a task", events.Event{Type: events.MessageDelivered, At: at, Task: "t1", MessageIDs: []string{"a", "b"}},
			[]MessageUpdate{{ID: "a", Task: "t1", Status: events.StatusDelivered, At: at}, {ID: "b", Task: "t1", Status: events.StatusDelivered, At: at}}},
		{"acknowledged by the leader", events.Event{Type: events.MessageAcknowledged, At: at, MessageIDs: []string{"a"}},
			[]MessageUpdate{{ID: "a", Status: events.StatusAcknowledged, At: at}}},
		{"rejected with a reason", events.Event{Type: events.MessageRejected, At: at, Task: "t2", Reason: "no", MessageIDs: []string{"a"}},
			[]MessageUpdate{{ID: "a", Task: "t2", Status: events.StatusRejected, At: at, Reason: "no"}}},
		{"a response acknowledges its question", events.Event{Type: events.TaskResponded, At: at, Task: "t1", Message: &events.Message{ID: "r", ReplyTo: "q"}},
			[]MessageUpdate{{ID: "q", Status: events.StatusAcknowledged, At: at}}},
		{"an ask timeout rejects the question", events.Event{Type: events.TaskAskTimedOut, At: at, Task: "t1", Reason: "late", MessageIDs: []string{"q"}},
			[]MessageUpdate{{ID: "q", Status: events.StatusRejected, At: at, Reason: "late"}}},
		{"a send changes nothing earlier", events.Event{Type: events.MessageSent, At: at, Task: "t1", Message: &events.Message{ID: "m"}}, nil},
		{"nor does a transition", events.Event{Type: events.TaskCompleted, At: at, Task: "t1"}, nil},
	} {
		if got := MessageUpdates(&c.e); !reflect.DeepEqual(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestRecipients(t *testing.T) {
	data, _ := json.Marshal(broadcastData{Recipients: []string{"t1", "t3"}})
	for _, c := range []struct {
		e    events.Event
		want []string
	}{
		{events.Event{Message: &events.Message{To: events.Broadcast, Direction: events.Inbox}, Data: data}, []string{"t1", "t3"}},
		{events.Event{Message: &events.Message{To: "t2", Direction: events.Inbox}}, []string{"t2"}},
		{events.Event{Message: &events.Message{To: "leader", Direction: events.Outbox}}, nil},
		{events.Event{}, nil},
	} {
		if got := Recipients(&c.e); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Recipients(%+v) = %v, want %v", c.e.Message, got, c.want)
		}
	}
}
