package nats_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/mailbox"
	natsstore "github.com/crew-dev/crew/store/nats"
)

// An event published on a subject that is not its actor's (what a worker
// allowed to publish on its own subject could do to pass for the leader)
// is refused by every reader: crew.ErrTampered, exit 8.
func TestEventOnAnotherActorsSubjectIsTampered(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	s := dial(t, srv.ClientURL(), natsstore.Options{})
	if err := s.CreateRun(ctx, created("r1")); err != nil {
		t.Fatal(err)
	}
	forged := &events.Event{Seq: 2, At: events.Now(), Type: events.MessageSent, Run: "r1", Actor: "leader", Reason: "forged"}
	line, err := events.Marshal(forged)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(natsConn(t, srv.ClientURL()))
	if _, err := js.Publish(ctx, natsstore.Subject("r1", "t1"), line[:len(line)-1]); err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	err = s.Read(ctx, "r1", 0, func(e *events.Event) error { seqs = append(seqs, e.Seq); return nil })
	if !errors.Is(err, crew.ErrTampered) || len(seqs) != 1 {
		t.Fatalf("read %v, %v; want seq 1, then ErrTampered", seqs, err)
	}
	if _, err := s.Event(ctx, "r1", 2); !errors.Is(err, crew.ErrTampered) {
		t.Fatalf("Event(2): %v, want ErrTampered", err)
	}
	// The same event on its actor's subject is read.
	ok := *forged
	ok.Seq = 3
	if err := s.Append(ctx, &ok, "op-3"); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Event(ctx, "r1", 3); err != nil || e.Actor != "leader" {
		t.Fatalf("Event(3): %v, %v", e, err)
	}
}

// A message kept under the key layout before senders had a token of their
// own (mail.<agent>.<name>) is still listed, found and archived.
func TestMailOfTheLayoutBeforeIsRead(t *testing.T) {
	srv := natstest.Server(t)
	s := dial(t, srv.ClientURL(), natsstore.Options{})
	tree := s.Mail()
	if err := tree.Create("t1"); err != nil {
		t.Fatal(err)
	}
	msg := mailbox.Mail{ID: "0193a1c2-0000-7000-8000-000000000001", From: "lead", To: "t1", Body: "old", Type: "coordination", Subject: "old", Timestamp: events.Now().Time}
	name, data, err := mailbox.File(msg)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(natsConn(t, srv.ClientURL()))
	kv, err := js.KeyValue(context.Background(), natsstore.MailBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(context.Background(), "mail.t1."+name, data); err != nil {
		t.Fatal(err)
	}
	// And one delivered now, under mail.t1.lead.<name>.
	msg2 := msg
	msg2.ID, msg2.Body = "0193a1c2-0000-7000-8000-000000000002", "new"
	name2, err := tree.Deliver("t1", msg2, false)
	if err != nil {
		t.Fatal(err)
	}
	list, errs, err := tree.List("t1", false)
	if err != nil || len(errs) > 0 || len(list) != 2 {
		t.Fatalf("List: %v %v %v", list, errs, err)
	}
	for _, n := range []string{name, name2, msg.ID, msg2.ID} {
		if e, err := tree.Find("t1", n); err != nil || (e.Name != name && e.Name != name2) {
			t.Fatalf("Find(%s): %+v, %v", n, e, err)
		}
	}
	if err := tree.SetRead("t1", name2, true, false); err != nil {
		t.Fatal(err)
	}
	if err := tree.SetRead("t1", name, true, false); err != nil {
		t.Fatal(err)
	}
	moved, err := tree.Archive("t1", 0, false, events.Now().Time.Add(1e9))
	if err != nil || len(moved) != 2 {
		t.Fatalf("Archive: %v, %v", moved, err)
	}
}
