package run

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// TestWorkerReadsItsTaskOnly: what a worker reads (stateFor a task id)
// holds its task only, as the run's whole state holds it, with its open
// messages, whichever way it was read: from open.jsonl (its tasks line
// decoded for that task only), or from the log (Apply leaving the other
// tasks out).
func TestWorkerReadsItsTaskOnly(t *testing.T) {
	r := newTestRun(t)
	ctx := context.Background()
	for _, id := range []string{"t1", "t2", "t3"} {
		_, err := r.AddTask(ctx, id, state.TaskSpec{Title: "task " + id, Agent: "agent-" + id}, Leader)
		must(t, err)
		_, err = r.Transition(ctx, id, task.Start, "agent-"+id, "", nil)
		must(t, err)
	}
	send := func(o SendOptions) {
		t.Helper()
		_, err := r.Send(ctx, o)
		must(t, err)
	}
	for range 130 { // open.jsonl is written after some 128 events
		send(SendOptions{Kind: events.KindReport, Task: "t3", From: "agent-t3", Body: "busy"})
	}
	r.Sync()
	if _, err := os.Stat(filepath.Join(r.Dir(), "open.jsonl")); err != nil {
		t.Fatal(err)
	}
	send(SendOptions{Kind: events.KindSteer, Task: "t1", From: Leader, Body: "one"})
	send(SendOptions{Kind: events.KindFollowUp, Task: "t2", From: Leader, Body: "two"})
	send(SendOptions{Kind: events.KindMessage, Task: events.Broadcast, From: Leader, Body: "all"})
	send(SendOptions{Kind: events.KindReport, Task: "t2", From: "agent-t2", Body: "half"})
	_, _, err := r.Ask(ctx, SendOptions{Task: "t1", From: "agent-t1", Body: "which?"}, false)
	must(t, err)
	_, err = r.Inbox(ctx, "t2", InboxOptions{})
	must(t, err)
	_, err = r.Transition(ctx, "t3", task.Fail, Leader, "gone", nil)
	must(t, err)

	check := func(how string) {
		t.Helper()
		whole, err := r.State()
		must(t, err)
		for _, id := range []string{"t1", "t2", "t3"} {
			one, err := r.stateFor(id)
			must(t, err)
			if len(one.Tasks) != 1 || !reflect.DeepEqual(one.Tasks[id], whole.Tasks[id]) {
				t.Errorf("%s: the state for %s holds %d tasks, its own %+v; want it only, as the whole state holds it: %+v", how, id, len(one.Tasks), one.Tasks[id], whole.Tasks[id])
			}
			if got, want := one.OpenFor(id), whole.OpenFor(id); !reflect.DeepEqual(got, want) || len(want) == 0 && id != "t3" {
				t.Errorf("%s: %s's open messages: %+v; want %+v", how, id, got, want)
			}
			if one.Seq != whole.Seq {
				t.Errorf("%s: the state for %s is at seq %d, the whole state at %d", how, id, one.Seq, whole.Seq)
			}
		}
	}
	check("from open.jsonl and the events after it")
	must(t, os.Remove(filepath.Join(r.Dir(), "open.jsonl")))
	check("from the log")
}
