package nats_test

import (
	"context"
	"testing"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	natsstore "github.com/crew-dev/crew/store/nats"
	"github.com/crew-dev/crew/task"
)

// With authorization, the wake records work for every role: the leader's
// run create makes WakeStream, a worker's and the leader's writes publish
// their records, and each one's waiter reads its participant's record at
// its rescans (no refusal, which would make every rescan wake its
// owner) and finds a lost wake-up there.
func TestWakeRecordsUnderAuthorization(t *testing.T) {
	url, leadCreds, workerCreds := authServer(t, "t1")
	ctx := context.Background()
	lead := dial(t, url, natsstore.Options{Creds: leadCreds})
	lr, err := run.NewRoot(lead).Create(run.CreateOptions{ID: "r1", Leader: "lead"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lr.AddTask(ctx, "t1", state.TaskSpec{}, "lead"); err != nil {
		t.Fatal(err)
	}
	worker := dial(t, url, natsstore.Options{Creds: workerCreds})
	wr, err := run.NewRoot(worker).Open("r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wr.Transition(ctx, "t1", task.Start, "t1", "", nil); err != nil {
		t.Fatal(err)
	}

	ww := wr.Watch("t1")
	defer ww.Close()
	lw := lr.Watch(state.Leader)
	defer lw.Close()
	if natsstore.WaiterReadsLog(ww) || natsstore.WaiterReadsLog(lw) {
		t.Fatal("a waiter reads the log: its wake records could not be read under authorization")
	}
	if natsstore.Rescan(ww) || natsstore.Rescan(lw) {
		t.Fatal("an idle rescan woke its owner (a refused request says yes)")
	}
	// The worker reports (it concerns the leader), the leader steers t1:
	// each appended with its records but without its wake-up.
	st, err := wr.State()
	if err != nil {
		t.Fatal(err)
	}
	report := &events.Event{Seq: st.Seq + 1, At: events.Now(), Type: events.MessageSent, Run: "r1", Task: "t1", Actor: "t1",
		Message: &events.Message{ID: "0193a1c2-0000-7000-8000-00000000000a", Kind: events.KindReport, From: "t1", To: "lead", Task: "t1", Direction: events.Outbox, Body: "lost"}}
	if err := worker.Append(ctx, report, "op-report"); err != nil {
		t.Fatal(err)
	}
	if !natsstore.Rescan(lw) {
		t.Fatal("the leader's rescan missed a worker's report whose wake-up was lost")
	}
	steer := &events.Event{Seq: st.Seq + 2, At: events.Now(), Type: events.MessageSent, Run: "r1", Task: "t1", Actor: "lead",
		Message: &events.Message{ID: "0193a1c2-0000-7000-8000-00000000000b", Kind: events.KindSteer, From: "lead", To: "t1", Task: "t1", Direction: events.Inbox, Body: "lost"}}
	if err := lead.Append(ctx, steer, "op-steer"); err != nil {
		t.Fatal(err)
	}
	if !natsstore.Rescan(ww) {
		t.Fatal("the worker's rescan missed the leader's steer whose wake-up was lost")
	}
}
