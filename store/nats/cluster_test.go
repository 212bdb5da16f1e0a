package nats_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	natsstore "github.com/crew-dev/crew/store/nats"
	"github.com/crew-dev/crew/task"
)

// cluster starts a three-node cluster for a test, with a context that
// turns a hang into a failure (it asserts nothing about speed).
func cluster(t *testing.T) (*natstest.Cluster, context.Context) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := natstest.NewCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	return c, ctx
}

// A three-node JetStream cluster on loopback, streams with three
// replicas: the node leading the run's stream is killed while a writer
// appends, and every append that was acknowledged is still there, once,
// in order, with seq dense.
func TestClusterNodeKilledLosesNoAcknowledgedAppend(t *testing.T) {
	c, ctx := cluster(t)
	s := dial(t, c.URL(), natsstore.Options{Replicas: 3})
	if err := s.CreateRun(ctx, created("r1")); err != nil {
		t.Fatal(err)
	}
	const total, killAt = 60, 20
	acked := map[int64]string{}
	head := int64(1)
	killed := -1
	for k := 0; k < total; k++ {
		if k == killAt {
			killed = c.StreamLeader(natsstore.StreamName("r1"))
			if killed < 0 {
				t.Fatal("no node leads the run's stream")
			}
			c.Kill(killed)
		}
		for {
			ev := &events.Event{Seq: head + 1, At: events.Now(), Type: events.MessageSent, Run: "r1", Actor: "w", Reason: fmt.Sprint("op-", k)}
			err := s.Append(ctx, ev, fmt.Sprint("op-", k))
			if err == nil {
				head++
				acked[head] = ev.Reason
				break
			}
			if !errors.Is(err, crew.ErrConflict) {
				t.Fatalf("append op-%d: %v", k, err)
			}
			// Stored before the failover but not acknowledged, then
			// refused on retry: the head moved, read it again.
			if head, err = s.Head(ctx, "r1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if killed < 0 {
		t.Fatal("no node was killed")
	}
	if c.Nodes[killed] != nil {
		t.Fatalf("node %d still up", killed)
	}
	c.WaitStreamLeader(natsstore.StreamName("r1"))
	t.Logf("killed node %d (the stream leader) after %d appends; the stream now led by node %d", killed, killAt, c.StreamLeader(natsstore.StreamName("r1")))
	// A fresh client on the surviving nodes reads everything back.
	s2 := dial(t, c.URL(), natsstore.Options{})
	var got []*events.Event
	if err := s2.Read(ctx, "r1", 0, func(e *events.Event) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: not dense", i, e.Seq)
		}
		if i > 0 {
			if seen[e.Reason] {
				t.Fatalf("%s stored twice", e.Reason)
			}
			seen[e.Reason] = true
		}
	}
	for seq, op := range acked {
		if seq > int64(len(got)) || got[seq-1].Reason != op {
			t.Fatalf("acknowledged %s at seq %d is lost after node %d was killed", op, seq, killed)
		}
	}
	if len(acked) != total || len(got) != total+1 {
		t.Fatalf("%d acknowledged, %d events; want %d and %d", len(acked), len(got), total, total+1)
	}
}

// The same at the level of crew's operations: two leaders, each with its
// own connection, steer one task through run.Run on a three-node
// cluster (replicas = 3 for the run's stream and the mail bucket) while
// the node leading the run's stream is killed. Every operation that
// returned success is in the log exactly once, seq is dense, the state
// read by a fresh client agrees, and every acknowledged message has its
// copy in the mail tree.
func TestClusterRunNodeKilledLosesNoAcknowledgedOperation(t *testing.T) {
	c, ctx := cluster(t)
	open := func() *run.Root { return run.NewRoot(dial(t, c.URL(), natsstore.Options{Replicas: 3})) }
	root := open()
	r, err := root.Create(run.CreateOptions{ID: "r1", Leader: "leader"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.AddTask(ctx, "t1", state.TaskSpec{}, "leader"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Transition(ctx, "t1", task.Start, "t1", "", nil); err != nil {
		t.Fatal(err)
	}
	const writers, per, killAfter = 2, 30, 10
	var (
		mu     sync.Mutex
		acked  = map[string]string{} // message id -> body
		failed int
		sent   int
	)
	killed := make(chan int, 1)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr, err := open().Open("r1")
			if err != nil {
				t.Error(err)
				return
			}
			for k := range per {
				body := fmt.Sprintf("w%d-%d", w, k)
				m, err := wr.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: body})
				mu.Lock()
				sent++
				if err == nil {
					acked[m.ID] = body
				} else {
					failed++ // not acknowledged: it may or may not be there
					t.Logf("%s: %v", body, err)
				}
				if sent == killAfter {
					i := c.StreamLeader(natsstore.StreamName("r1"))
					c.Kill(i)
					killed <- i
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	k := <-killed
	c.WaitStreamLeader(natsstore.StreamName("r1"))
	t.Logf("killed node %d (the stream leader) after %d operations; %d acknowledged, %d failed", k, killAfter, len(acked), failed)
	if failed > per/2 {
		t.Fatalf("%d of %d operations failed: the cluster did not recover", failed, writers*per)
	}

	fresh, err := open().Open("r1")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var seq int64
	cur, err := fresh.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	err = cur.Scan(nil, func(e *events.Event) error {
		if e.Seq != seq+1 {
			return fmt.Errorf("seq %d after %d: not dense", e.Seq, seq)
		}
		seq = e.Seq
		if e.Message != nil {
			seen[e.Message.ID]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, body := range acked {
		if seen[id] != 1 {
			t.Errorf("acknowledged steer %s (%s) is in the log %d times; want once", id, body, seen[id])
		}
	}
	st, err := fresh.State()
	if err != nil || st.Seq != seq || st.Tasks["t1"].Status != task.Running {
		t.Fatalf("state from a fresh client: seq %d, %v; want seq %d, t1 running", st.Seq, err, seq)
	}
	copies, bad, err := fresh.Root().Mail().List("t1", false)
	if err != nil || len(bad) > 0 {
		t.Fatal(err, bad)
	}
	have := map[string]bool{}
	for _, e := range copies {
		have[e.Mail.ID] = true
	}
	for id, body := range acked {
		if !have[id] {
			t.Errorf("acknowledged steer %s (%s) has no mail copy", id, body)
		}
	}
}
