package run

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
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store/natsstore"
	"github.com/crew-dev/crew/task"
)

// Two writers with their own connections and their own cached states
// start the same task at once through remoteLog.commit: the loser's
// append is refused (the seq was taken), it reads the winner's event,
// validates again, and the state machine refuses it: exactly one
// task.started, and the loser gets ErrConflict.
func TestRemoteCommitRevalidatesAfterLosingTheSeq(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	dial := func() *natsstore.Store { return natstest.Dial(t, srv.ClientURL(), natsstore.Options{}) }
	a, b := dial(), dial()
	m, _ := json.Marshal(state.Manifest{ID: "r1", Leader: "leader"})
	if err := a.CreateRun(ctx, &events.Event{Seq: 1, At: events.Now(), Type: events.RunCreated, Run: "r1", Data: m}); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(state.TaskSpec{Agent: "t1"})
	la, lb := newTestLog(a), newTestLog(b)
	if _, err := la.commit(&op{ctx: ctx, fn: func(*state.State) (*events.Event, error) {
		return &events.Event{Type: events.TaskCreated, Task: "t1", To: string(task.Pending), Data: spec}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	// Both states are read before either writes.
	if _, err := lb.snapshot(ctx); err != nil {
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
	for i, l := range []*remoteLog{la, lb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.commit(&op{ctx: ctx, fn: start})
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
	st, err := fresh.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Seq != 3 || st.Tasks["t1"].Status != task.Running || st.Tasks["t1"].Attempts != 1 {
		t.Fatalf("state at seq %d: t1 %+v; want seq 3, running, started once", st.Seq, st.Tasks["t1"])
	}
}

// newTestLog is a remoteLog on s for run r1 that projects nothing.
func newTestLog(s RemoteStore) *remoteLog {
	return &remoteLog{s: s, run: "r1", project: func([]treeAct) error { return nil }}
}

// A process that only reads a busy run (crew run wait, crew watch) keeps
// no more than about maxActs of what the run's messages ask of the mail
// tree: it drops those the writers have done (the projection mark).
func TestRemoteReaderKeepsBoundedActs(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	s := natstest.Dial(t, srv.ClientURL(), natsstore.Options{})
	m, _ := json.Marshal(state.Manifest{ID: "r1", Leader: "leader"})
	if err := s.CreateRun(ctx, &events.Event{Seq: 1, At: events.Now(), Type: events.RunCreated, Run: "r1", Data: m}); err != nil {
		t.Fatal(err)
	}
	writer, reader := newTestLog(s), newTestLog(natstest.Dial(t, srv.ClientURL(), natsstore.Options{}))
	steer := func(*state.State) (*events.Event, error) {
		return &events.Event{Type: events.MessageSent, Actor: "leader", Message: &events.Message{ID: uuid.NewString(), Kind: events.KindSteer,
			Direction: events.Inbox, From: "leader", To: "leader", Body: "x", Priority: "normal"}}, nil
	}
	most := 0
	for i := range maxActs + 300 {
		if _, err := writer.commit(&op{ctx: ctx, fn: steer}); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			if _, err := reader.snapshot(ctx); err != nil {
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
