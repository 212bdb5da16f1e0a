package runtest

import (
	"context"
	"slices"
	"testing"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// testRunLeaderIsTold: a task failed by crew task fail and one whose
// supervised worker exited carry crew's failure messages to the leader
// (docs/state-machine.md, Notices to the leader): open in its pending,
// copied into its mail tree, the same from another handle replaying the
// log, and closed by its acknowledgement.
func testRunLeaderIsTold(t *testing.T, s Store) {
	ctx := context.Background()
	r := newRun(t, s, "t1", "t2")
	for _, id := range []string{"t1", "t2"} {
		of(r.Transition(ctx, id, task.Start, id, "", nil)).must(t)
	}
	of(r.Transition(ctx, "t1", task.Fail, "leader", "boom", nil)).must(t)
	if err := r.WorkerStarted(ctx, "t2", &state.Worker{Attempt: 1, PID: 1, Host: "elsewhere", Command: []string{"w"}}); err != nil {
		t.Fatal(err)
	}
	code := 2
	if err := r.WorkerExited(ctx, "t2", &state.WorkerExit{Attempt: 1, PID: 1, Code: &code, Tail: "last words\n"}, false, ""); err != nil {
		t.Fatal(err)
	}
	p := of(r.Pending(run.Leader)).must(t)
	var bodies, ids []string
	for _, m := range p.Messages {
		if m.Kind != events.KindFailure || m.From != state.CrewActor || m.To != "leader" {
			t.Errorf("the leader's open %+v, want crew's failure", m)
		}
		bodies, ids = append(bodies, m.Body), append(ids, m.ID)
	}
	want := []string{"task t1 failed: boom", "task t2 failed: worker exited with status 2\nits output ended with:\nlast words"}
	if !slices.Equal(bodies, want) {
		t.Fatalf("the leader's pending %q, want %q", bodies, want)
	}
	for _, id := range ids {
		if e := of(s.Root.Mail().Find("leader", id)).must(t); e.Mail.Kind != events.KindFailure || e.Mail.Read {
			t.Errorf("the leader's copy of %s: %+v, want an unread failure", id, e.Mail)
		}
	}
	if t1 := of(r.Pending("t1")).must(t); len(t1.Messages) != 0 {
		t.Errorf("t1's pending %+v, want nothing: the failure is the leader's", t1.Messages)
	}
	// Another handle reads the log again: the same messages, same ids.
	r2 := of(s.Root.Open("r1")).must(t)
	var again []string
	for _, m := range of(r2.Pending(run.Leader)).must(t).Messages {
		again = append(again, m.ID)
	}
	if !slices.Equal(again, ids) {
		t.Errorf("another handle's pending %v, want %v", again, ids)
	}
	if err := r.Acknowledge(ctx, run.Leader, ids, false, ""); err != nil {
		t.Fatal(err)
	}
	if p := of(r2.Pending(run.Leader)).must(t); len(p.Messages) != 0 {
		t.Errorf("acknowledged, still pending: %+v", p.Messages)
	}
	for _, id := range ids {
		if e := of(s.Root.Mail().Find("leader", id)).must(t); !e.Mail.Read {
			t.Errorf("acknowledged, the leader's copy of %s is unread", id)
		}
	}
}
