package state

import (
	"encoding/json"
	"testing"

	"github.com/crew-dev/crew/events"
)

// Crew's notices to the leader (a failure, a question timed out) are
// messages the event carries: the reducer opens one for the leader, with
// a copy for its mail directory, as it opens a report, and the leader's
// acknowledgement closes it. An event written before notices existed
// carries none and opens nothing: an old log reads as it always did.
func TestNoticeOpensForTheLeader(t *testing.T) {
	at := events.Now()
	spec, _ := json.Marshal(TaskSpec{Agent: "builder"})
	notice := &events.Message{ID: "n1", Seq: 6, Kind: events.KindFailure, Direction: events.Outbox, Task: "t1",
		From: CrewActor, To: "lead", Body: "task t1 failed: boom", Priority: events.PriorityHigh, SentAt: at}
	log := []events.Event{
		{Seq: 1, At: at, Type: events.RunCreated, Data: json.RawMessage(`{"id":"r1","leader":"lead"}`)},
		{Seq: 2, At: at, Type: events.TaskCreated, Task: "t1", To: "pending", Data: spec},
		{Seq: 3, At: at, Type: events.TaskStarted, Task: "t1", From: "pending", To: "running"},
		// Written before notices: no message.
		{Seq: 4, At: at, Type: events.TaskFailed, Task: "t1", From: "running", To: "failed", Reason: "old"},
		{Seq: 5, At: at, Type: events.TaskRetried, Task: "t1", From: "failed", To: "pending"},
		{Seq: 6, At: at, Type: events.WorkerExited, Task: "t1", Actor: CrewActor, From: "pending", To: "failed", Reason: "boom",
			Message: notice, Data: json.RawMessage(`{"attempt":1,"pid":1}`)},
		{Seq: 7, At: at, Type: events.MessageAcknowledged, Actor: "lead", MessageIDs: []string{"n1"}},
	}
	st := New()
	var delivered []string
	for i := range log {
		effects, err := st.Apply(&log[i])
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range effects {
			if e.Deliver != nil {
				delivered = append(delivered, e.Agent+":"+e.Deliver.ID)
			}
		}
		open := st.OpenFor(Leader)
		switch log[i].Seq {
		case 4, 5:
			if len(open) != 0 {
				t.Fatalf("seq %d: an old task.failed opened %+v", log[i].Seq, open[0])
			}
		case 6:
			if len(open) != 1 || open[0].ID != "n1" || open[0].Kind != events.KindFailure || open[0].File != events.Outbox || open[0].Task != "" {
				t.Fatalf("seq 6: the leader's open %+v, want the failure n1", open)
			}
			if st.Files[events.Outbox] != 6 {
				t.Fatalf("seq 6: outbox projection ends at %d, want the notice's seq 6", st.Files[events.Outbox])
			}
		case 7:
			if len(open) != 0 {
				t.Fatalf("seq 7: acknowledged, still open: %+v", open)
			}
		}
	}
	if len(delivered) != 1 || delivered[0] != "lead:n1" {
		t.Fatalf("mail-tree copies %v, want the leader's of n1", delivered)
	}
	if st.Tasks["t1"].Status != "failed" || st.Tasks["t1"].Reason != "boom" {
		t.Fatalf("t1 %+v", st.Tasks["t1"])
	}
}
