package run

import (
	"context"
	"errors"
	"testing"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// Regression: acknowledging a message that is already closed was a silent
// success for anyone, although while it was open only its recipient could
// acknowledge it. A worker that acknowledged the wrong id (another task's
// steer, the leader's report) was told all was well. Now a closed message
// acknowledged again by its recipient is still a no-op, and by anyone else
// a conflict, as while it was open.
func TestAcknowledgeClosedMessageOnlyByItsRecipient(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root, err := Init(dir, crew.PrivatePerm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() }) // snapshots still being written, before TempDir goes
	r, err := root.Create(CreateOptions{ID: "r1", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"t1", "t2"} {
		if _, err := r.AddTask(ctx, id, state.TaskSpec{}, "leader"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Transition(ctx, id, task.Start, id, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	send := func(o SendOptions) *events.Message {
		t.Helper()
		m, err := r.Send(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ack := func(who, id string, want error) {
		t.Helper()
		err := r.Acknowledge(ctx, who, []string{id}, false, "")
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("%s acknowledges %s: %v, want %v", who, id, err, want)
		}
	}

	steer := send(SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: "look here"})
	ack("t2", steer.ID, crew.ErrConflict) // open: refused, as before
	ack("t1", steer.ID, nil)
	ack("t1", steer.ID, nil) // again by its recipient: a no-op
	ack("t2", steer.ID, crew.ErrConflict)
	ack(Leader, steer.ID, crew.ErrConflict)

	report := send(SendOptions{Kind: events.KindReport, Task: "t1", From: "t1", Body: "half done"})
	ack(Leader, report.ID, nil)
	ack("t1", report.ID, crew.ErrConflict) // its sender is not its recipient
	ack(Leader, report.ID, nil)

	q, _, err := r.Ask(ctx, SendOptions{Task: "t2", From: "t2", Body: "which way?"}, false)
	if err != nil {
		t.Fatal(err)
	}
	send(SendOptions{Kind: events.KindResponse, Task: "t2", From: "leader", Body: "left"})
	ack("t2", q.ID, crew.ErrConflict) // the question went to the leader
	ack(Leader, q.ID, nil)            // closed by the response: the leader's

	// A broadcast has one copy per task that was open when it was sent.
	b := send(SendOptions{Kind: events.KindMessage, Task: events.Broadcast, From: "leader", Body: "freeze"})
	if _, err := r.AddTask(ctx, "t3", state.TaskSpec{}, "leader"); err != nil {
		t.Fatal(err)
	}
	ack("t1", b.ID, nil)
	ack("t1", b.ID, nil)
	ack("t3", b.ID, crew.ErrConflict) // not among its recipients
	ack(Leader, b.ID, crew.ErrConflict)
	ack("t2", b.ID, nil) // t2's own copy is still open
}

// A reject's reason in invalid UTF-8 is refused (docs/files.md, Body limit: crew never
// alters text silently), and nothing is written.
func TestRejectReasonMustBeUTF8(t *testing.T) {
	ctx := context.Background()
	r := newTestRun(t)
	_, err := r.AddTask(ctx, "t1", state.TaskSpec{}, "leader")
	must(t, err)
	m, err := r.Send(ctx, SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: "x"})
	must(t, err)
	before := len(logEvents(t, r))
	if err := r.Acknowledge(ctx, "t1", []string{m.ID}, true, "bad\xff"); !errors.Is(err, crew.ErrInvalid) {
		t.Fatalf("reject with an invalid UTF-8 reason: %v, want ErrInvalid", err)
	}
	if n := len(logEvents(t, r)); n != before {
		t.Fatalf("the refused reject wrote %d events", n-before)
	}
}
