package app_test

import (
	"context"
	"errors"
	"testing"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
)

// A task's own worker (the identity's task) acts as the task's agent;
// anyone else moving it acts as the run's leader, unless As says.
func TestTaskActor(t *testing.T) {
	ctx := context.Background()
	lead := newApp(t, app.Identity{})
	worker := as(lead, app.Identity{Task: "t1"})
	if _, err := worker.TaskStart(ctx, app.TaskRef{}); err != nil {
		t.Fatal(err)
	}
	if _, err := lead.TaskStart(ctx, app.TaskRef{Task: "t2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := lead.TaskFail(ctx, app.TaskMove{Task: "t3", Reason: "not needed", As: "boss"}); err != nil {
		t.Fatal(err)
	}
	actors := map[string]string{}
	err := lead.Events(ctx, app.Events{Types: []string{events.TaskStarted, events.TaskFailed}}, nil, func(ev *events.Event) error {
		actors[ev.Task] = ev.Actor
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"t1": "builder", "t2": "leader", "t3": "boss"}
	for id, actor := range want {
		if actors[id] != actor {
			t.Errorf("%s moved by %q, want %q", id, actors[id], actor)
		}
	}
	if _, err := lead.TaskStart(ctx, app.TaskRef{}); !errors.Is(err, crew.ErrInvalid) {
		t.Errorf("start with no task: %v, want invalid", err)
	}
}

// RunWait returns the run's record with the wait's outcome, and tells
// its progress of the tasks it waits on.
func TestRunWait(t *testing.T) {
	ctx := context.Background()
	a := newApp(t, app.Identity{})
	for _, id := range []string{"t1", "t2"} {
		if _, err := a.TaskStart(ctx, app.TaskRef{Task: id}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.TaskComplete(ctx, app.TaskComplete{Task: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.TaskCancel(ctx, app.TaskMove{Task: "t3"}); err != nil {
		t.Fatal(err)
	}
	var seen []app.Progress
	rec, err := a.RunWait(ctx, app.RunWait{Timeout: "1m"}, func(p app.Progress) { seen = append(seen, p) })
	if !errors.Is(err, crew.ErrIncomplete) {
		t.Fatalf("wait: %v, want incomplete", err)
	}
	if rec == nil || rec.ID != "r1" || rec.TaskCount != 3 || len(rec.Tasks) != 3 || rec.Summary != "3/3 done · 1 cancelled" {
		t.Fatalf("wait's record: %+v", rec)
	}
	if len(seen) == 0 || seen[len(seen)-1].Run != "r1" || len(seen[len(seen)-1].State.Tasks) != 3 {
		t.Fatalf("progress: %+v", seen)
	}
	if _, err := a.RunWait(ctx, app.RunWait{Timeout: "soon"}, nil); !errors.Is(err, crew.ErrInvalid) {
		t.Fatalf("wait with a bad timeout: %v, want invalid", err)
	}
}
