package state

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/crew-dev/crew/events"
)

// TaskList orders tasks by the seq of their task.created event, not by
// their millisecond timestamp: tasks added within one millisecond (a
// script's loop, one group commit) keep the order they were added in,
// also after the state went through tasks.json.
func TestTaskListOrderIsCreationOrder(t *testing.T) {
	at := events.Now()
	st := New()
	for i, id := range []string{"zeta", "alpha", "mid"} {
		data, _ := json.Marshal(TaskSpec{Agent: id})
		if _, err := st.Apply(&events.Event{Seq: int64(i + 2), At: at, Type: events.TaskCreated, Task: id, To: "pending", Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(s *State) string {
		var ids []string
		for _, tk := range s.TaskList() {
			ids = append(ids, tk.ID)
		}
		return strings.Join(ids, ",")
	}
	if got := names(st); got != "zeta,alpha,mid" {
		t.Fatalf("TaskList = %s, want zeta,alpha,mid (creation order)", got)
	}
	data, err := json.Marshal(st) // as tasks.json holds it
	if err != nil {
		t.Fatal(err)
	}
	back := New()
	if err := json.Unmarshal(data, back); err != nil {
		t.Fatal(err)
	}
	if got := names(back); got != "zeta,alpha,mid" {
		t.Fatalf("after tasks.json, TaskList = %s, want zeta,alpha,mid", got)
	}
}
