package nats_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	natsstore "github.com/crew-dev/crew/store/nats"
)

// A read that needs a consumer, and a waiter, delete theirs when done:
// every consumer left on a run's stream costs the server work on each
// event appended to it (a run with many readers slowed down to a few
// events per second before they did).
func TestReadAndWatchLeaveNoConsumers(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	s := dial(t, srv.ClientURL(), natsstore.Options{})
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

// An Append whose answer was lost is stored: the retry (same operation
// id, same expected last seq) is refused by a single server, which checks
// the expected seq before it looks for a duplicate, and Append must still
// report success, not a conflict that its caller would validate again
// (and then refuse a respond, or store a steer twice).
func TestAppendRetriedAfterLostAnswerSucceeds(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	s := dial(t, srv.ClientURL(), natsstore.Options{})
	if err := s.CreateRun(ctx, created("r1")); err != nil {
		t.Fatal(err)
	}
	ev := &events.Event{Seq: 2, At: events.Now(), Type: events.MessageSent, Run: "r1", Actor: "a", Reason: "steer"}
	line, err := events.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	// The first attempt, stored; its acknowledgement never reached crew.
	js, _ := jetstream.New(natsConn(t, srv.ClientURL()))
	if _, err := js.Publish(ctx, natsstore.Subject("r1", "a"), line[:len(line)-1], jetstream.WithMsgID("op-2"), jetstream.WithExpectLastSequence(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, ev, "op-2"); err != nil {
		t.Fatalf("Append retried after its answer was lost: %v, want nil", err)
	}
	if h, err := s.Head(ctx, "r1"); err != nil || h != 2 {
		t.Fatalf("head %d, %v; want 2 (stored once)", h, err)
	}
	// Another operation's event at that seq is a conflict.
	other := &events.Event{Seq: 2, At: events.Now(), Type: events.MessageSent, Run: "r1", Actor: "b", Reason: "another"}
	if err := s.Append(ctx, other, "op-other"); !errors.Is(err, crew.ErrConflict) {
		t.Fatalf("Append of another operation at a taken seq: %v, want ErrConflict", err)
	}
}

// Runs and mailboxes whose ids differ only in case, made at the same
// instant by writers on their own connections (as on machines of their
// own): one of each is made, the others are refused (docs/concepts.md,
// Identifiers).
func TestCaseVariantsMadeAtOnce(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	variants := []string{"caseA1", "CASEA1", "Casea1", "cAsEa1", "casea1", "CaSeA1"}
	for _, kind := range []string{"run", "mailbox"} {
		errs := make([]error, len(variants))
		start := make(chan struct{})
		done := make(chan int)
		for i, v := range variants {
			s := dial(t, srv.ClientURL(), natsstore.Options{})
			go func() {
				<-start
				if kind == "run" {
					errs[i] = s.CreateRun(ctx, created(v))
				} else {
					errs[i] = s.Mail().Create("box" + v)
				}
				done <- i
			}()
		}
		close(start)
		for range variants {
			<-done
		}
		made := 0
		for i, err := range errs {
			switch {
			case err == nil:
				made++
			case !errors.Is(err, crew.ErrConflict):
				t.Fatalf("%s %s: %v, want nil or ErrConflict", kind, variants[i], err)
			}
		}
		if made != 1 {
			t.Errorf("%s: %d of %d case variants made, want 1 (errors %v)", kind, made, len(variants), errs)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                        "nats://127.0.0.1:4222",
		"nats://u:s3cr3t@127.0.0.1:4222":               "nats://127.0.0.1:4222",
		"u:s3cr3t@127.0.0.1:4222":                      "127.0.0.1:4222",
		"nats://a:1,u:s3cr3t@b:2":                      "nats://a:1,b:2",
		"nats://tok3n@a:1, tls://u:p@ss:w@rd@b:2":      "nats://a:1,tls://b:2",
		"tls://a:1,nats://s3cr3t@b:2,c:3,u:s3cr3t@d:4": "tls://a:1,nats://b:2,c:3,d:4",
	} {
		got := natsstore.Redact(in)
		if got != want || strings.Contains(got, "s3cr3t") || strings.Contains(got, "tok3n") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// A message on a run's subject that is no event (published by something
// else than crew) is damage: a reader gets every event before it, then an
// error wrapping crew.ErrDamaged (the CLI prints what it could read and
// exits 7), never nothing.
func TestReaderPrintsWhatComesBeforeDamage(t *testing.T) {
	srv := natstest.Server(t)
	s := dial(t, srv.ClientURL(), natsstore.Options{})
	root := run.NewRoot(s)
	r, err := root.Create(run.CreateOptions{ID: "r1", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"t1", "t2"} {
		if _, err := r.AddTask(ctx, id, state.TaskSpec{}, run.Leader); err != nil {
			t.Fatal(err)
		}
	}
	// Through JetStream, which answers once it is stored: a plain
	// publish is not waited for, and the read below could come first.
	js, _ := jetstream.New(natsConn(t, srv.ClientURL()))
	if _, err := js.Publish(ctx, natsstore.Subject("r1", "leader"), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	c, err := r.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var seqs []int64
	for {
		e, err := c.Next()
		if errors.Is(err, crew.ErrDamaged) {
			break
		}
		if err != nil {
			t.Fatalf("after seqs %v: %v, want ErrDamaged", seqs, err)
		}
		seqs = append(seqs, e.Seq)
	}
	if len(seqs) != 3 || seqs[2] != 3 {
		t.Fatalf("read seqs %v before the damage, want 1 2 3", seqs)
	}
}
