package nats_test

// What only the JetStream client has, below store.Log, and so
// store/storetest cannot see: Append's condition on the log's last seq,
// and an Append retried with the same operation id stored once.

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	natsstore "github.com/crew-dev/crew/store/nats"
)

// event is a steer by actor as seq seq of run id.
func event(id string, seq int64, actor string) *events.Event {
	return &events.Event{Seq: seq, At: events.Now(), Type: events.MessageSent, Run: id, Task: "t1", Actor: actor,
		Message: &events.Message{ID: fmt.Sprintf("m-%s-%d", actor, seq), Seq: seq, Run: id, Task: "t1", Kind: events.KindSteer,
			Direction: events.Inbox, From: actor, To: "t1", Body: "body " + actor, Priority: "normal", Status: events.StatusPending}}
}

func readAll(t *testing.T, s *natsstore.Store, id string, since int64) []*events.Event {
	t.Helper()
	var out []*events.Event
	if err := s.Read(context.Background(), id, since, func(e *events.Event) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("read %s since %d: %v", id, since, err)
	}
	return out
}

func seqs(evs []*events.Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

// Append stores seq head+1 only: any other seq is refused
// (crew.ErrConflict), seq 0 is no seq (crew.ErrInvalid), and nothing of a
// refused append is stored. Read reads from a cursor and stops when its
// fn fails; an unknown run is crew.ErrNotFound.
func TestAppendKeepsSeqDense(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	s := dial(t, srv.ClientURL(), natsstore.Options{})
	if err := s.CreateRun(ctx, created("r1")); err != nil {
		t.Fatal(err)
	}
	if h, err := s.Head(ctx, "r1"); h != 1 || err != nil {
		t.Errorf("Head of a new run = %d, %v; want 1", h, err)
	}
	for seq := int64(2); seq <= 10; seq++ {
		if err := s.Append(ctx, event("r1", seq, "a"), fmt.Sprint("op-", seq)); err != nil {
			t.Fatalf("append seq %d: %v", seq, err)
		}
	}
	for _, seq := range []int64{12, 10, 5, 1} {
		if err := s.Append(ctx, event("r1", seq, "b"), fmt.Sprint("bad-", seq)); !errors.Is(err, crew.ErrConflict) {
			t.Errorf("append seq %d after seq 10: %v; want ErrConflict", seq, err)
		}
	}
	if err := s.Append(ctx, event("r1", 0, "b"), "zero"); !errors.Is(err, crew.ErrInvalid) {
		t.Errorf("append seq 0: %v; want ErrInvalid", err)
	}
	got := seqs(readAll(t, s, "r1", 0))
	if fmt.Sprint(got) != "[1 2 3 4 5 6 7 8 9 10]" {
		t.Fatalf("seqs = %v; want 1..10, nothing of the refused appends", got)
	}
	if h, err := s.Head(ctx, "r1"); h != 10 || err != nil {
		t.Errorf("Head = %d, %v; want 10", h, err)
	}
	for _, e := range readAll(t, s, "r1", 1) {
		if e.Actor != "a" || e.Message == nil || e.Message.Body != "body a" {
			t.Errorf("seq %d = %+v; want writer a's event", e.Seq, e)
		}
	}
	if got := seqs(readAll(t, s, "r1", 7)); fmt.Sprint(got) != "[8 9 10]" {
		t.Errorf("since 7 = %v; want [8 9 10]", got)
	}
	if got := readAll(t, s, "r1", 10); len(got) != 0 {
		t.Errorf("since 10 = %v; want nothing", seqs(got))
	}
	if got := readAll(t, s, "r1", 99); len(got) != 0 {
		t.Errorf("since 99 = %v; want nothing", seqs(got))
	}
	n := 0
	stop := errors.New("stop")
	err := s.Read(ctx, "r1", 0, func(*events.Event) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Errorf("Read with fn failing at the 3rd event: %v after %d; want stop after 3", err, n)
	}
	if err := s.Read(ctx, "nope", 0, func(*events.Event) error { return nil }); !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("read unknown run: %v; want ErrNotFound", err)
	}
	if err := s.Append(ctx, event("nope", 2, "x"), "op"); !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("append to unknown run: %v; want ErrNotFound", err)
	}
}

// A retried append (same operation id, same seq: its acknowledgement was
// lost) is stored once, and the retry is told it succeeded (NATS answers
// a duplicate with the first acknowledgement).
func TestRetriedAppendStoredOnce(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	s := dial(t, srv.ClientURL(), natsstore.Options{})
	if err := s.CreateRun(ctx, created("r1")); err != nil {
		t.Fatal(err)
	}
	ev := event("r1", 2, "a")
	if err := s.Append(ctx, ev, "op-retried"); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, ev, "op-retried"); err != nil {
		t.Fatalf("retried append: %v; want nil", err)
	}
	if got := seqs(readAll(t, s, "r1", 0)); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("seqs = %v; want [1 2]: the retry stored once", got)
	}
	if err := s.Append(ctx, event("r1", 3, "a"), "op-next"); err != nil {
		t.Fatalf("append after the retry: %v", err)
	}
}
