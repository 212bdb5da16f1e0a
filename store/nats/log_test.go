package nats

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
	"github.com/crew-dev/crew/task"
)

// Two writers with their own connections and their own cached states
// start the same task at once through Log.Commit: the loser's
// append is refused (the seq was taken), it reads the winner's event,
// validates again, and the state machine refuses it: exactly one
// task.started, and the loser gets ErrConflict.
func TestLogCommitRevalidatesAfterLosingTheSeq(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	dial := func() *Store { return testDial(t, srv.ClientURL()) }
	a, b := dial(), dial()
	m, _ := json.Marshal(state.Manifest{ID: "r1", Leader: "leader"})
	if err := a.CreateRun(ctx, &events.Event{Seq: 1, At: events.Now(), Type: events.RunCreated, Run: "r1", Data: m}); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(state.TaskSpec{Agent: "t1"})
	la, lb := newTestLog(a), newTestLog(b)
	if _, err := la.Commit(ctx, store.Change{Validate: func(*state.State) (*events.Event, error) {
		return &events.Event{Type: events.TaskCreated, Task: "t1", To: string(task.Pending), Data: spec}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	// Both states are read before either writes.
	if _, err := lb.State(ctx, state.New()); err != nil {
		t.Fatal(err)
	}
	start := func(st *state.State) (*events.Event, error) {
		t1, err := st.Task("t1")
		if err != nil {
			return nil, err
		}
		next, err := task.Next(t1.ID, t1.Status, task.Start)
		if err != nil {
			return nil, err
		}
		return &events.Event{Type: events.TaskStarted, Task: "t1", From: string(t1.Status), To: string(next)}, nil
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, l := range []*Log{la, lb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.Commit(ctx, store.Change{Validate: start})
		}()
	}
	wg.Wait()
	ok, conflict := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, crew.ErrConflict):
			conflict++
		default:
			t.Fatal(err)
		}
	}
	if ok != 1 || conflict != 1 {
		t.Fatalf("errors %v: want one success and one conflict", errs)
	}
	fresh := newTestLog(dial())
	st, err := fresh.State(ctx, state.New())
	if err != nil {
		t.Fatal(err)
	}
	if st.Seq != 3 || st.Tasks["t1"].Status != task.Running || st.Tasks["t1"].Attempts != 1 {
		t.Fatalf("state at seq %d: t1 %+v; want seq 3, running, started once", st.Seq, st.Tasks["t1"])
	}
}

// newTestLog is a Log on s for run r1 that projects nothing.
func newTestLog(s *Store) *Log {
	return &Log{s: s, run: "r1", project: func([]mailbox.Act) error { return nil }}
}

// testDial connects a Store to url, closed by t.Cleanup.
func testDial(t testing.TB, url string) *Store {
	t.Helper()
	s, err := Dial(context.Background(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A process that only reads a busy run (crew run wait, crew watch) keeps
// no more than about maxActs of what the run's messages ask of the mail
// tree: it drops those the writers have done (the projection mark).
func TestLogReaderKeepsBoundedActs(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	s := testDial(t, srv.ClientURL())
	m, _ := json.Marshal(state.Manifest{ID: "r1", Leader: "leader"})
	if err := s.CreateRun(ctx, &events.Event{Seq: 1, At: events.Now(), Type: events.RunCreated, Run: "r1", Data: m}); err != nil {
		t.Fatal(err)
	}
	writer, reader := newTestLog(s), newTestLog(testDial(t, srv.ClientURL()))
	steer := func(*state.State) (*events.Event, error) {
		return &events.Event{Type: events.MessageSent, Actor: "leader", Message: &events.Message{ID: uuid.NewString(), Kind: events.KindSteer,
			Direction: events.Inbox, From: "leader", To: "leader", Body: "x", Priority: "normal"}}, nil
	}
	most := 0
	for i := range maxActs + 300 {
		if _, err := writer.Commit(ctx, store.Change{Validate: steer}); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			if _, err := reader.State(ctx, state.New()); err != nil {
				t.Fatal(err)
			}
			most = max(most, len(reader.acts))
		}
	}
	if most > maxActs+50 {
		t.Fatalf("a reader kept %d acts; want at most about %d", most, maxActs)
	}
	if len(writer.acts) > markEvery+1 {
		t.Fatalf("the writer kept %d acts after projecting them", len(writer.acts))
	}
}

// With Options.KeepLogs, Open returns the run's one Log, which keeps the
// state it has read and brings it up to what other processes appended
// since; without it, each Open is a new Log.
func TestKeepLogs(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	kept, err := Dial(ctx, srv.ClientURL(), Options{KeepLogs: true})
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	other := testDial(t, srv.ClientURL())
	m, _ := json.Marshal(state.Manifest{ID: "r1", Leader: "leader"})
	if err := other.CreateRun(ctx, &events.Event{Seq: 1, At: events.Now(), Type: events.RunCreated, Run: "r1", Data: m}); err != nil {
		t.Fatal(err)
	}
	l1, err := kept.Open(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := l1.State(ctx, state.New()); err != nil || st.Seq != 1 {
		t.Fatalf("state of the new run: seq %v, %v; want 1", st, err)
	}
	spec, _ := json.Marshal(state.TaskSpec{Agent: "t1"})
	if _, err := newTestLog(other).Commit(ctx, store.Change{Validate: func(*state.State) (*events.Event, error) {
		return &events.Event{Type: events.TaskCreated, Task: "t1", To: string(task.Pending), Data: spec}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	l2, err := kept.Open(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if l2 != l1 {
		t.Fatal("a second Open with KeepLogs made a new Log")
	}
	st, err := l2.State(ctx, state.New())
	if err != nil || st.Seq != 2 || len(st.Tasks) != 1 {
		t.Fatalf("the kept Log after another process's commit: %+v, %v; want seq 2 with task t1", st, err)
	}
	a, _ := other.Open(ctx, "r1")
	b, _ := other.Open(ctx, "r1")
	if a == b {
		t.Error("without KeepLogs, two Opens returned one Log")
	}
}
