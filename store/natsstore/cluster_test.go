package natsstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/store/natsstore"
)

func created(id string) *events.Event {
	data, _ := json.Marshal(map[string]string{"id": id, "leader": "leader"})
	return &events.Event{Seq: 1, At: events.Now(), Type: events.RunCreated, Run: id, Actor: "leader", Data: data}
}

// A three-node JetStream cluster on loopback, streams with three
// replicas: the node leading the run's stream is killed while a writer
// appends, and every append that was acknowledged is still there, once,
// in order, with seq dense.
func TestClusterNodeKilledLosesNoAcknowledgedAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := natstest.NewCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := natsstore.Dial(ctx, c.URL(), natsstore.Options{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
	s2, err := natsstore.Dial(ctx, c.URL(), natsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
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
