package state

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/task"
)

// TestShareTasks: a state and its ShareTasks copy hold the same tasks
// until Apply changes one in either; then only that one is copied, and
// the other state still holds the task as it was. Decoded states (a
// snapshot read from tasks.json) follow the same rule.
func TestShareTasks(t *testing.T) {
	st := New()
	seq := int64(0)
	apply := func(s *State, e *events.Event) {
		t.Helper()
		seq++
		e.Seq, e.At = seq, events.Now()
		if _, err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	apply(st, &events.Event{Type: events.RunCreated, Data: json.RawMessage(`{"id":"r1","leader":"lead"}`)})
	for i := 1; i <= 3; i++ {
		apply(st, &events.Event{Type: events.TaskCreated, Task: fmt.Sprintf("t%d", i), To: "pending", Data: json.RawMessage(`{}`)})
	}
	start := func(id string) *events.Event {
		return &events.Event{Type: events.TaskStarted, Task: id, Actor: id, From: "pending", To: "running"}
	}

	snap := st.ShareTasks()
	if snap.Tasks["t2"] != st.Tasks["t2"] {
		t.Fatal("ShareTasks copied a task: it should share it")
	}
	apply(st, start("t1"))
	if got := snap.Tasks["t1"].Status; got != task.Pending {
		t.Fatalf("Apply to the state changed the task its copy holds: t1 is %s there", got)
	}
	if st.Tasks["t1"].Status != task.Running || st.Tasks["t1"] == snap.Tasks["t1"] {
		t.Fatal("Apply did not give the state its own changed t1")
	}
	if snap.Tasks["t2"] != st.Tasks["t2"] {
		t.Fatal("Apply copied a task it did not change")
	}

	// The copy changes a task on its side: the state's stays as it was.
	apply(snap, start("t2"))
	if st.Tasks["t2"].Status != task.Pending || snap.Tasks["t2"].Status != task.Running {
		t.Fatalf("t2 is %s in the state and %s in its copy, want pending and running", st.Tasks["t2"].Status, snap.Tasks["t2"].Status)
	}

	// Shared again, and again changed: a task owned once is copied again.
	again := st.ShareTasks()
	apply(st, &events.Event{Type: events.TaskCompleted, Task: "t1", Actor: "t1", From: "running", To: "completed"})
	if again.Tasks["t1"].Status != task.Running || snap.Tasks["t1"].Status != task.Pending {
		t.Fatalf("t1 is %s and %s in the two copies, want running and pending", again.Tasks["t1"].Status, snap.Tasks["t1"].Status)
	}

	// A state decoded from JSON owns its tasks until it is shared.
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	dec := New()
	if err := json.Unmarshal(data, dec); err != nil {
		t.Fatal(err)
	}
	shared := dec.ShareTasks()
	apply(dec, start("t3"))
	if shared.Tasks["t3"].Status != task.Pending || dec.Tasks["t3"].Status != task.Running {
		t.Fatalf("t3 is %s in the decoded state's copy and %s in it, want pending and running", shared.Tasks["t3"].Status, dec.Tasks["t3"].Status)
	}
}
