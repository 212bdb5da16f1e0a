package nats_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	natsstore "github.com/crew-dev/crew/store/nats"
	"github.com/crew-dev/crew/task"
)

// A waiter in ask --wait looks first at the event its wake-up names
// (store.Hinter), but a wake-up that names another event, one past the
// log's end, or nothing (anyone may publish one) only costs it a read:
// it gets its own answer, once.
func TestAskWithForgedWakeHintsGetsItsAnswer(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	lead := dial(t, srv.ClientURL(), natsstore.Options{})
	r, err := run.NewRoot(lead).Create(run.CreateOptions{ID: "r1", Leader: "lead"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"t1", "t2"} {
		if _, err := r.AddTask(ctx, id, state.TaskSpec{}, "lead"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Transition(ctx, id, task.Start, id, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	worker := dial(t, srv.ClientURL(), natsstore.Options{})
	wr, err := run.NewRoot(worker).Open("r1")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		m   *events.Message
		err error
	}
	done := make(chan result, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, m, err := wr.Ask(wctx, run.SendOptions{Task: "t1", From: "t1", Body: "which port?"}, true)
		done <- result{m, err}
	}()
	nc := natsConn(t, srv.ClientURL())
	waitFor := func(id string, want task.State) {
		t.Helper()
		for range 200 {
			st, err := r.TaskState()
			if err == nil && st.Tasks[id].Status == want {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("task %s never %s", id, want)
	}
	waitFor("t1", task.Waiting)
	// t2's question: a real event, not t1's answer.
	if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindQuestion, Task: "t2", From: "t2", Body: "and mine?"}); err != nil {
		t.Fatal(err)
	}
	st, _ := r.TaskState()
	for _, forged := range []string{"2", "999999", "", "not a seq", "1"} {
		if err := nc.Publish(natsstore.WakeSubject("r1", "t1"), []byte(forged)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Publish(natsstore.WakeSubject("r1", "t1"), []byte(fmtSeq(st.Seq))); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	time.Sleep(100 * time.Millisecond)
	select {
	case res := <-done:
		t.Fatalf("ask --wait returned before its answer: %v, %v", res.m, res.err)
	default:
	}
	if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindResponse, Task: "t1", From: "lead", Body: "port 8080"}); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.m == nil || res.m.Body != "port 8080" {
		t.Fatalf("ask --wait: %+v, %v", res.m, res.err)
	}
}

func fmtSeq(seq int64) string { return strconv.FormatInt(seq, 10) }
