package natsstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/store/natsstore"
)

// A read that needs a consumer, and a waiter, delete theirs when done:
// every consumer left on a run's stream costs the server work on each
// event appended to it (a run with many readers slowed down to a few
// events per second before they did).
func TestReadAndWatchLeaveNoConsumers(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	s := natstest.Dial(t, srv.ClientURL(), natsstore.Options{})
	if err := s.CreateRun(ctx, created("r1")); err != nil {
		t.Fatal(err)
	}
	for seq := int64(2); seq <= 40; seq++ {
		ev := &events.Event{Seq: seq, At: events.Now(), Type: events.MessageSent, Run: "r1", Actor: "a", Reason: fmt.Sprint(seq)}
		if err := s.Append(ctx, ev, fmt.Sprint("op-", seq)); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		n := 0
		if err := s.Read(ctx, "r1", 0, func(*events.Event) error { n++; return nil }); err != nil || n != 40 {
			t.Fatalf("read %d events, %v; want 40", n, err)
		}
	}
	for range 3 {
		w, err := s.Watch(ctx, "r1", 0)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := w.Wait(wctx); err != nil {
			t.Fatalf("watch from seq 0: %v", err)
		}
		cancel()
		w.Close()
	}
	// The waiters' consumers are deleted in the background: wait (bounded)
	// for the server to have none.
	js, _ := jetstream.New(natsConn(t, srv.ClientURL()))
	st, err := js.Stream(ctx, natsstore.StreamName("r1"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Consumers == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d consumers left on the run's stream after 5 reads and 3 closed waiters; want 0", info.State.Consumers)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func natsConn(t *testing.T, url string) *nats.Conn {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
