package nats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/internal/teststores"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	natsstore "github.com/crew-dev/crew/store/nats"
	"github.com/crew-dev/crew/task"
)

// snapshotRun makes run r1 of tasks t000… each started and asked a
// question (three events a task, the questions left open), through s.
func snapshotRun(t *testing.T, s *natsstore.Store, tasks int) {
	t.Helper()
	ctx := context.Background()
	r, err := run.NewRoot(s).Create(run.CreateOptions{ID: "r1", Leader: "lead"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range tasks {
		id := fmt.Sprintf("t%03d", i)
		if _, err := r.AddTask(ctx, id, state.TaskSpec{Title: "task " + id}, "lead"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Transition(ctx, id, task.Start, id, "", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindQuestion, Task: id, From: id, Body: "question of " + id}); err != nil {
			t.Fatal(err)
		}
	}
}

// replayed is run r1's state as a replay of its whole log, through a
// store of its own.
func replayed(t *testing.T, url string) *state.State {
	t.Helper()
	s := dial(t, url, natsstore.Options{})
	st := state.New()
	if err := s.Read(context.Background(), "r1", 0, func(e *events.Event) error { st.Apply(e); return nil }); err != nil {
		t.Fatal(err)
	}
	return st
}

// fresh opens r1 through a new connection (a new crew process) and
// returns its state and how many events it read for it.
func fresh(t *testing.T, url string) (*state.State, int64) {
	t.Helper()
	return freshCreds(t, url, "")
}

// freshCreds is fresh with credentials.
func freshCreds(t *testing.T, url, creds string) (*state.State, int64) {
	t.Helper()
	s := dial(t, url, natsstore.Options{Creds: creds})
	l, err := s.Open(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	before := s.EventsRead()
	st, err := l.State(context.Background(), state.New())
	if err != nil {
		t.Fatal(err)
	}
	return st, s.EventsRead() - before
}

func sameState(t *testing.T, got, want *state.State) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) || len(got.Open) != len(want.Open) {
		t.Fatalf("state from the snapshot differs from the log's:\n%s\n%s", g, w)
	}
	for k, o := range want.Open {
		if g := got.Open[k]; g == nil || *g != *o {
			t.Fatalf("open message %s: %+v, want %+v", k, g, o)
		}
	}
}

// A process that opens a run starts from its snapshot: it reads only the
// events after it, and its state is the replay's.
func TestSnapshotReaderReadsOnlyAfterIt(t *testing.T) {
	srv := natstest.Server(t)
	url := srv.ClientURL()
	snapshotRun(t, dial(t, url, natsstore.Options{}), 100) // 301 events: a snapshot is due
	want := replayed(t, url)
	st, read := fresh(t, url)
	sameState(t, st, want)
	if read >= want.Seq/2 {
		t.Fatalf("read %d events of %d: the snapshot was not used", read, want.Seq)
	}
}

// A snapshot that does not match the log (another run's under the same
// id, a stale one whose seq is past the log, one the projection mark has
// not reached), cannot be decoded, or is missing is ignored: the state is
// rebuilt from the whole log, and is right.
func TestSnapshotUnusableIsRebuilt(t *testing.T) {
	srv := natstest.Server(t)
	url := srv.ClientURL()
	snapshotRun(t, dial(t, url, natsstore.Options{}), 100)
	want := replayed(t, url)
	ctx := context.Background()
	js, _ := jetstream.New(natsConn(t, url))
	kv, err := js.KeyValue(ctx, natsstore.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	good, err := kv.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	doc := natsstore.DecodeSnapshot(t, good.Value())
	// Forged tasks with the sum of a message that is not the one at its
	// seq; a seq past the log's end; garbage.
	forged := doc
	forged.Sum = "0000000000000000000000000000000000000000000000000000000000000000"
	past := doc
	past.Seq = want.Seq + 50
	for name, value := range map[string][]byte{
		"other sum": natsstore.EncodeSnapshot(t, forged),
		"past":      natsstore.EncodeSnapshot(t, past),
		"garbage":   []byte("not a snapshot"),
	} {
		if _, err := kv.Put(ctx, "r1", value); err != nil {
			t.Fatal(err)
		}
		st, read := fresh(t, url)
		sameState(t, st, want)
		if read != want.Seq {
			t.Fatalf("%s: read %d events, want the whole log (%d)", name, read, want.Seq)
		}
	}
	// The good one again, but behind the mark: set the mark before it.
	if _, err := kv.Put(ctx, "r1", good.Value()); err != nil {
		t.Fatal(err)
	}
	if _, read := fresh(t, url); read >= want.Seq/2 {
		t.Fatalf("the good snapshot back: read %d events of %d", read, want.Seq)
	}
	mail, err := js.KeyValue(ctx, natsstore.MailBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mail.Put(ctx, "projected.r1", []byte(fmt.Sprint(doc.Seq-1))); err != nil {
		t.Fatal(err)
	}
	st, read := fresh(t, url)
	sameState(t, st, want)
	if read != want.Seq {
		t.Fatalf("behind the mark: read %d events, want the whole log (%d)", read, want.Seq)
	}
	// Missing.
	if err := kv.Delete(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	st, read = fresh(t, url)
	sameState(t, st, want)
	if read != want.Seq {
		t.Fatalf("missing: read %d events, want the whole log (%d)", read, want.Seq)
	}
}

// With authorization, the leader's processes write the snapshots and the
// workers' only read them: a worker's process starts from the leader's
// snapshot, writes none however far it is behind, and its credentials
// cannot write one (a forged snapshot would be a way around the log).
func TestSnapshotLeaderWritesWorkersRead(t *testing.T) {
	url, leadCreds, workerCreds := authServer(t, "t000")
	ctx := context.Background()
	lead := dial(t, url, natsstore.Options{Creds: leadCreds})
	r, err := run.NewRoot(lead).Create(run.CreateOptions{ID: "r1", Leader: "lead"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 160 {
		if _, err := r.AddTask(ctx, fmt.Sprintf("t%03d", i), state.TaskSpec{}, "lead"); err != nil {
			t.Fatal(err)
		}
	}
	revision := func() uint64 {
		t.Helper()
		js, _ := jetstream.New(natsConnCreds(t, url, leadCreds))
		kv, err := js.KeyValue(ctx, natsstore.SnapshotBucket)
		if err != nil {
			t.Fatal(err)
		}
		e, err := kv.Get(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		return e.Revision()
	}
	written := revision()

	// The worker reads from the leader's snapshot ...
	worker := dial(t, url, natsstore.Options{Creds: workerCreds})
	wr, err := run.NewRoot(worker).Open("r1")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := wr.State(); err != nil || len(st.Tasks) != 160 {
		t.Fatalf("worker's state: %v, %v", st, err)
	}
	if n := worker.EventsRead(); n > 60 {
		t.Fatalf("the worker read %d events of 161: not from the snapshot", n)
	}
	// ... and writes none, however many events it appends.
	if _, err := wr.Transition(ctx, "t000", task.Start, "t000", "", nil); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := wr.Send(ctx, run.SendOptions{Kind: events.KindReport, Task: "t000", From: "t000", Body: fmt.Sprint("report ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if rev := revision(); rev != written {
		t.Fatalf("a worker's process wrote a snapshot (revision %d, was %d)", rev, written)
	}
	// Its credentials cannot.
	js, _ := jetstream.New(natsConnCreds(t, url, workerCreds))
	kv, err := js.KeyValue(ctx, natsstore.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := kv.Put(pctx, "r1", []byte("forged")); err == nil {
		t.Fatal("a worker's credentials wrote a snapshot")
	}
	if rev := revision(); rev != written {
		t.Fatalf("snapshot revision %d, was %d", rev, written)
	}
	// The leader's next process writes it, once it is due.
	lead2 := dial(t, url, natsstore.Options{Creds: leadCreds})
	lr, err := run.NewRoot(lead2).Open("r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lr.State(); err != nil {
		t.Fatal(err)
	}
	if rev := revision(); rev == written {
		t.Fatal("the leader's process wrote no snapshot 200 events past the last")
	}
	if st, read := freshCreds(t, url, leadCreds); len(st.Open) != 200 || read > 10 {
		t.Fatalf("from the leader's new snapshot: %d open messages, %d events read", len(st.Open), read)
	}
}

// natsConnCreds is a NATS connection to url with creds, closed by
// t.Cleanup.
func natsConnCreds(t *testing.T, url, creds string) *nats.Conn {
	agent, _ := natsstore.CredsAgent(creds)
	nc, err := nats.Connect(url, nats.UserCredentials(creds), nats.CustomInboxPrefix(natsstore.InboxPrefix(agent)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// authServer starts a NATS server with crew's authorization and returns
// its URL and the credentials of the leader lead and of worker.
func authServer(t *testing.T, worker string) (url, leadCreds, workerCreds string) {
	t.Helper()
	dir := t.TempDir()
	srv, _, err := teststores.AuthServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	a, _, err := natsstore.LoadAuthority(filepath.Join(dir, "auth"))
	if err != nil {
		t.Fatal(err)
	}
	if leadCreds, err = a.WriteCreds(dir, natsstore.RoleLeader, "lead"); err != nil {
		t.Fatal(err)
	}
	if workerCreds, err = a.WriteCreds(dir, natsstore.RoleWorker, worker); err != nil {
		t.Fatal(err)
	}
	return srv.ClientURL(), leadCreds, workerCreds
}
