package nats

import (
	"context"
	"testing"
	"time"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
)

// The safety-net rescan wakes a waiter for an event that concerns it
// whose wake-up was lost (appended, never published), and not for the
// others' events: waking on any growth had every idle waiter of a busy
// run read the log at each rescan.
func TestWakeRescanWakesOnlyForItsOwn(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	s := testDial(t, srv.ClientURL())
	if err := s.CreateRun(ctx, &events.Event{Seq: 1, At: events.Now(), Type: events.RunCreated, Run: "r1", Actor: "leader", Data: []byte(`{"id":"r1","leader":"leader"}`)}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, watchTimeout)
	defer cancel()
	w, err := s.watchFor(wctx, "r1", []string{"t1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ww := w.(*wakeWaiter)
	if ww.missed(ctx) {
		t.Fatal("a rescan of a log that did not grow woke its owner")
	}
	seq := int64(2)
	appendFor := func(task string) {
		t.Helper()
		// Store.Append publishes no wake-up: as if its writer died
		// before it did.
		e := &events.Event{Seq: seq, At: events.Now(), Type: events.TaskCreated, Run: "r1", Task: task, Actor: "leader", To: "pending", Data: []byte(`{"agent":"` + task + `"}`)}
		if err := s.Append(ctx, e, "op-"+task); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	for _, other := range []string{"t2", "t3", "t4"} {
		appendFor(other)
	}
	if ww.missed(ctx) {
		t.Fatal("a rescan woke t1's waiter for other tasks' events")
	}
	appendFor("t1")
	appendFor("t5")
	if !ww.missed(ctx) {
		t.Fatal("a rescan missed an event for t1 whose wake-up was lost")
	}
	if ww.missed(ctx) {
		t.Fatal("a rescan woke its owner twice for one event")
	}
}

// A wake-up names the seq of the event that concerns its waiter
// (store.Hinter), where an owner looks first.
func TestWakeHintNamesTheEvent(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	s := testDial(t, srv.ClientURL())
	if err := s.CreateRun(ctx, &events.Event{Seq: 1, At: events.Now(), Type: events.RunCreated, Run: "r1", Actor: "leader", Data: []byte(`{"id":"r1","leader":"leader"}`)}); err != nil {
		t.Fatal(err)
	}
	l := newTestLog(s)
	w := l.Watch("t2")
	defer w.Close()
	for _, task := range []string{"t1", "t2", "t3"} {
		if _, err := l.Commit(ctx, store.Change{Validate: func(*state.State) (*events.Event, error) {
			return &events.Event{Type: events.TaskCreated, Task: task, Actor: "leader", To: "pending", Data: []byte(`{"agent":"` + task + `"}`)}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	h := w.(store.Hinter)
	if got := h.Hint(); got != 3 {
		t.Fatalf("Hint() = %d, want 3 (t2's task.created)", got)
	}
	if got := h.Hint(); got != 0 {
		t.Fatalf("Hint() again = %d, want 0", got)
	}
}
