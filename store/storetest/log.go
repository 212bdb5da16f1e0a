package storetest

// The store-level suite: store.Store and store.Log, as package run uses
// them. A store only keeps each run's events in order, seq 1, 2, 3 …
// with no gap, and appends one only at the end it was validated
// against; these tests hold it to that.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/proctest"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
)

// created is the first event of run id: run.created at seq 1, holding
// its manifest (leader "leader").
func created(id string) *events.Event {
	now := events.Now()
	data, _ := json.Marshal(state.Manifest{ID: id, Title: "conformance", Leader: "leader", CreatedAt: now, Dir: "/"})
	return &events.Event{Seq: 1, At: now, Type: events.RunCreated, Run: id, Actor: "leader", Data: data}
}

// steer is the event a Validate returns for a steer by actor to t1,
// carrying message id and, as its Reason, what the test names it by:
// without seq, time or run, which the log stamps.
func steer(actor, reason, id string) *events.Event {
	return &events.Event{Type: events.MessageSent, Task: "t1", Actor: actor, Reason: reason,
		Message: &events.Message{ID: id, Task: "t1", Kind: events.KindSteer, Direction: events.Inbox,
			From: actor, To: "t1", Body: "body " + actor, Priority: events.DefaultPriority}}
}

// newID returns a fresh message id.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

// commitSteer commits a steer by actor named reason on l.
func commitSteer(ctx context.Context, l store.Log, actor, reason string) (*events.Event, error) {
	id := newID() // one id for every time Validate runs
	return l.Commit(ctx, store.Change{Validate: func(*state.State) (*events.Event, error) {
		return steer(actor, reason, id), nil
	}})
}

// createLog creates run r1 on s's store and returns its log.
func createLog(t *testing.T, s Store) store.Log {
	t.Helper()
	l, err := s.Store.Create(context.Background(), created("r1"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// readAll reads l's events after since through a cursor; damage fails
// the test.
func readAll(t *testing.T, l store.Log, since int64) []*events.Event {
	t.Helper()
	c, err := l.Events(since)
	if err != nil {
		t.Fatalf("events of %s since %d: %v", l, since, err)
	}
	defer c.Close()
	var out []*events.Event
	err = c.Scan(func(de *events.DamageError) { t.Errorf("damage in %s: %v", l, de) }, func(e *events.Event) error {
		e2 := *e
		out = append(out, &e2)
		return nil
	})
	if err != nil {
		t.Fatalf("read %s since %d: %v", l, since, err)
	}
	return out
}

// logHead returns the seq at the end of l.
func logHead(ctx context.Context, l store.Log) (int64, error) {
	st, err := l.State(ctx, state.NewTasks())
	if err != nil {
		return 0, err
	}
	return st.Seq, nil
}

func seqs(evs []*events.Event) []int64 {
	return proctest.Pluck(evs, func(e *events.Event) int64 { return e.Seq })
}

// Create makes a run whole, its log starting with run.created at seq 1,
// its leader given a mailbox; ids in use in any letter case are
// refused, bad ids too, and a refused creation makes nothing. Open finds
// the run, and no other.
func testCreate(t *testing.T, s Store) {
	ctx := proctest.Ctx(t)
	st := s.Store
	l, err := st.Create(ctx, created("r1"))
	if err != nil {
		t.Fatal(err)
	}
	if m := l.Manifest(); m.ID != "r1" || m.Leader != "leader" || m.Title != "conformance" {
		t.Errorf("manifest of the created run = %+v", m)
	}
	ids, err := st.Runs(ctx)
	if err != nil || len(ids) != 1 || ids[0] != "r1" {
		t.Fatalf("Runs = %v, %v; want [r1]", ids, err)
	}
	if !st.Mail().Exists("leader") {
		t.Errorf("the leader of a new run has no mailbox")
	}
	if _, err := st.Create(ctx, created("R1")); !errors.Is(err, crew.ErrConflict) {
		t.Errorf("create R1 beside r1: %v; want ErrConflict (ids differing only in case)", err)
	}
	if _, err := st.Create(ctx, created("r1")); !errors.Is(err, crew.ErrConflict) {
		t.Errorf("create r1 again: %v; want ErrConflict", err)
	}
	for _, bad := range []string{"a/b", "..", "a.b", ""} {
		if _, err := st.Create(ctx, created(bad)); !errors.Is(err, crew.ErrInvalid) {
			t.Errorf("create %q: %v; want ErrInvalid", bad, err)
		}
	}
	notCreated := created("r2")
	notCreated.Type = events.TaskCreated // not a run's first event
	if _, err := st.Create(ctx, notCreated); !errors.Is(err, crew.ErrInvalid) {
		t.Errorf("create r2 from a task.created event: %v; want ErrInvalid", err)
	}
	if err := st.Mail().Create("Boss"); err != nil {
		t.Fatal(err)
	}
	bossed := created("r3")
	bossed.Actor = "boss"
	bossed.Data = []byte(strings.Replace(string(bossed.Data), `"leader":"leader"`, `"leader":"boss"`, 1))
	if _, err := st.Create(ctx, bossed); !errors.Is(err, crew.ErrConflict) {
		t.Errorf("create r3 led by boss beside a mailbox Boss: %v; want ErrConflict (agents differing only in case)", err)
	}
	if ids, err := st.Runs(ctx); err != nil || len(ids) != 1 || ids[0] != "r1" {
		t.Errorf("Runs after refused creations = %v, %v; want [r1]: a refused creation makes nothing", ids, err)
	}
	evs := readAll(t, l, 0)
	if len(evs) != 1 || evs[0].Type != events.RunCreated || evs[0].Seq != 1 {
		t.Fatalf("log of a new run = %+v; want run.created at seq 1", evs)
	}
	var m state.Manifest
	if err := json.Unmarshal(evs[0].Data, &m); err != nil || m.ID != "r1" || m.Leader != "leader" {
		t.Errorf("manifest in run.created = %+v, %v", m, err)
	}
	if h, err := logHead(ctx, l); h != 1 || err != nil {
		t.Errorf("head = %d, %v; want 1", h, err)
	}
	l2, err := st.Open(ctx, "r1")
	if err != nil {
		t.Fatalf("open the created run: %v", err)
	}
	if m := l2.Manifest(); m.ID != "r1" || m.Leader != "leader" || m.Title != "conformance" {
		t.Errorf("manifest of the opened run = %+v", m)
	}
	if got := seqs(readAll(t, l2, 0)); fmt.Sprint(got) != "[1]" {
		t.Errorf("log of the opened run = %v; want [1]", got)
	}
	if _, err := st.Open(ctx, "nope"); !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("open unknown run: %v; want ErrNotFound", err)
	}
}

// Commit appends each change's event as the next seq, validated against
// the state at the log's end and stamped with its seq, run and time;
// another Log of the run (as another process holds one) reads the same
// and commits after it, and the first commits after that.
func testCommitKeepsSeqDense(t *testing.T, s Store) {
	ctx := proctest.Ctx(t)
	l := createLog(t, s)
	for seq := int64(2); seq <= 10; seq++ {
		id := newID()
		ev, err := l.Commit(ctx, store.Change{Validate: func(st *state.State) (*events.Event, error) {
			if st.Seq != seq-1 {
				return nil, fmt.Errorf("validated against seq %d; want %d, the log's end", st.Seq, seq-1)
			}
			return steer("a", fmt.Sprint("a-", seq), id), nil
		}})
		if err != nil {
			t.Fatalf("commit seq %d: %v", seq, err)
		}
		if ev == nil || ev.Seq != seq || ev.Run != "r1" || ev.At.IsZero() || ev.Message == nil || ev.Message.Seq != seq {
			t.Fatalf("commit seq %d returned %+v; want the event stamped with seq %d, run r1 and a time", seq, ev, seq)
		}
	}
	if got := seqs(readAll(t, l, 0)); fmt.Sprint(got) != "[1 2 3 4 5 6 7 8 9 10]" {
		t.Fatalf("seqs = %v; want 1..10", got)
	}
	for i, e := range readAll(t, l, 1) {
		if e.Actor != "a" || e.Reason != fmt.Sprint("a-", i+2) || e.Message == nil || e.Message.Body != "body a" {
			t.Errorf("seq %d = %+v; want writer a's event a-%d", e.Seq, e, i+2)
		}
	}
	l2, err := s.Store.Open(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if got := seqs(readAll(t, l2, 0)); fmt.Sprint(got) != "[1 2 3 4 5 6 7 8 9 10]" {
		t.Errorf("another Log of the run reads %v", got)
	}
	if ev, err := commitSteer(ctx, l2, "c", "c-11"); err != nil || ev.Seq != 11 {
		t.Fatalf("commit through another Log: %+v, %v; want seq 11", ev, err)
	}
	if ev, err := commitSteer(ctx, l, "a", "a-12"); err != nil || ev.Seq != 12 {
		t.Fatalf("commit through the first Log after another's: %+v, %v; want seq 12", ev, err)
	}
}

// A change Validate refuses, one with nothing to write and a cancelled
// one write nothing, and take no seq.
func testCommitRefusesAndCancels(t *testing.T, s Store) {
	ctx := proctest.Ctx(t)
	l := createLog(t, s)
	if _, err := commitSteer(ctx, l, "a", "a-2"); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	if ev, err := l.Commit(ctx, store.Change{Validate: func(*state.State) (*events.Event, error) { return nil, refused }}); !errors.Is(err, refused) || ev != nil {
		t.Errorf("commit refused by Validate: %v, %v; want Validate's error", ev, err)
	}
	if ev, err := l.Commit(ctx, store.Change{Validate: func(*state.State) (*events.Event, error) { return nil, nil }}); err != nil || ev != nil {
		t.Errorf("commit with nothing to write: %v, %v; want nil, nil", ev, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if ev, err := commitSteer(cctx, l, "b", "cancelled"); !errors.Is(err, context.Canceled) || ev != nil {
		t.Errorf("commit with a cancelled context: %+v, %v; want context.Canceled and nothing written", ev, err)
	}
	if got := seqs(readAll(t, l, 0)); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("seqs = %v; want [1 2], nothing of the refused commits", got)
	}
	if ev, err := commitSteer(ctx, l, "a", "a-3"); err != nil || ev.Seq != 3 {
		t.Errorf("commit after the refused ones: %+v, %v; want seq 3", ev, err)
	}
}

// Cursors read from any seq, stop when told, and, at the end of the log,
// later return what was appended meanwhile, by this Log or another.
func testCursorsReadFromAnySeq(t *testing.T, s Store) {
	ctx := proctest.Ctx(t)
	l := createLog(t, s)
	for seq := 2; seq <= 10; seq++ {
		if _, err := commitSteer(ctx, l, "a", fmt.Sprint("a-", seq)); err != nil {
			t.Fatal(err)
		}
	}
	if got := seqs(readAll(t, l, 7)); fmt.Sprint(got) != "[8 9 10]" {
		t.Errorf("since 7 = %v; want [8 9 10]", got)
	}
	if got := readAll(t, l, 10); len(got) != 0 {
		t.Errorf("since 10 = %v; want nothing", seqs(got))
	}
	if got := readAll(t, l, 99); len(got) != 0 {
		t.Errorf("since 99 = %v; want nothing", seqs(got))
	}
	// A reader that stops early.
	c, err := l.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	stop := errors.New("stop")
	err = c.Scan(nil, func(*events.Event) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	c.Close()
	if !errors.Is(err, stop) || n != 3 {
		t.Errorf("Scan with fn failing at the 3rd event: %v after %d; want stop after 3", err, n)
	}
	// A cursor at the end of the log returns what is appended later.
	c, err = l.Events(8)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var tail []int64
	for {
		e, err := c.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("cursor since 8 after %v: %v", tail, err)
		}
		tail = append(tail, e.Seq)
	}
	if fmt.Sprint(tail) != "[9 10]" {
		t.Errorf("cursor since 8 = %v; want [9 10], then io.EOF", tail)
	}
	l2, err := s.Store.Open(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := commitSteer(ctx, l2, "c", "c-11"); err != nil || ev.Seq != 11 {
		t.Fatalf("commit through another Log: %+v, %v; want seq 11", ev, err)
	}
	if e, err := c.Next(); err != nil || e.Seq != 11 || e.Reason != "c-11" {
		t.Errorf("the cursor at the end, after another commit: seq %d (%s), %v; want seq 11", e.Seq, e.Reason, err)
	}
	if _, err := c.Next(); err != io.EOF {
		t.Errorf("the cursor past seq 11: %v; want io.EOF", err)
	}
}

// Many processes commit a change that only the first may make (its
// Validate refuses with crew.ErrConflict unless the log ends at seq 1):
// exactly one wins, the others get ErrConflict, and the log holds the
// winner's event.
func testRaceExactlyOneWins(t *testing.T, s Store) {
	l := createLog(t, s)
	const n = 6
	outs := proctest.Race(t, s.Addr, n, "race", "w")
	won := 0
	var winner string
	for i, out := range outs {
		switch strings.TrimSpace(out) {
		case "won":
			won++
			winner = fmt.Sprint("w", i)
		case "lost":
		default:
			t.Errorf("writer %d: %q", i, out)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers won seq 2; want exactly 1", won)
	}
	evs := readAll(t, l, 0)
	if len(evs) != 2 || evs[1].Seq != 2 || evs[1].Actor != winner {
		t.Fatalf("log = %v; want seq 2 by %s", seqs(evs), winner)
	}
}

// Writers in several processes commit at once: nothing is lost or
// duplicated, seq stays dense, and each writer's own order is kept.
func testConcurrentWritersDense(t *testing.T, s Store) {
	l := createLog(t, s)
	const writers, each = 3, 15
	outs := proctest.Race(t, s.Addr, writers, "commit", "w", fmt.Sprint(each))
	for i, out := range outs {
		if strings.TrimSpace(out) != "ok" {
			t.Errorf("writer %d: %q", i, out)
		}
	}
	evs := readAll(t, l, 0)
	if len(evs) != 1+writers*each {
		t.Fatalf("%d events; want %d", len(evs), 1+writers*each)
	}
	next := map[string]int{}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: not dense", i, e.Seq)
		}
		if i == 0 {
			continue
		}
		k := next[e.Actor]
		if want := fmt.Sprintf("%s-%d", e.Actor, k); e.Reason != want {
			t.Fatalf("seq %d by %s is %q; want %q (each writer's order kept, none lost or twice)", e.Seq, e.Actor, e.Reason, want)
		}
		next[e.Actor] = k + 1
	}
	for i := range writers {
		if got := next[fmt.Sprint("w", i)]; got != each {
			t.Errorf("writer w%d: %d events in the log; want %d", i, got, each)
		}
	}
}

// A waiter wakes for a commit made after Watch, even one made before
// Wait, and is woken when another process commits.
func testWatchWakes(t *testing.T, s Store) {
	ctx := proctest.Ctx(t)
	l := createLog(t, s)
	// Committed between Watch and Wait: not missed.
	w := l.Watch()
	if _, err := commitSteer(ctx, l, "self", "self-0"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := w.Wait(wctx); err != nil {
		t.Errorf("a commit after Watch, before Wait: %v; want a wake-up", err)
	}
	cancel()
	w.Close()

	w = l.Watch()
	defer w.Close()
	woke := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for {
			if err := w.Wait(wctx); err != nil {
				woke <- err
				return
			}
			// A wake-up is a hint: only growth past seq 2 counts.
			if h, _ := logHead(ctx, l); h > 2 {
				woke <- nil
				return
			}
		}
	}()
	select {
	case err := <-woke:
		t.Fatalf("woke (%v) before anything was committed", err)
	case <-time.After(300 * time.Millisecond):
	}
	out := proctest.Spawn(t, 1, func(int) proctest.Spec {
		return proctest.Spec{Mode: "commit", Addr: s.Addr, Run: "r1", Name: "other", Args: []string{"1"}}
	}, nil)
	if strings.TrimSpace(out[0]) != "ok" {
		t.Fatalf("committing process: %q", out[0])
	}
	if err := <-woke; err != nil {
		t.Fatalf("waiter was not woken by another process's commit: %v", err)
	}
}

// logHelper is the helper process of the store-level tests, given by
// mode:
//
//	race    read the state, wait for the barrier, commit a steer by NAME
//	        that Validate refuses (crew.ErrConflict) unless the log ends
//	        at seq 1; print won or lost
//	commit  wait for the barrier, commit ARGS[0] steers by NAME, the k-th
//	        with Reason NAME-k; print ok
//
// It returns the process's exit code.
func logHelper(ctx context.Context, s store.Store, spec proctest.Spec) int {
	name := spec.Name
	if spec.Mode != "race" && spec.Mode != "commit" {
		fmt.Printf("unknown helper mode %q\n", spec.Mode)
		return 2
	}
	l, err := s.Open(ctx, spec.Run)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	// Every racer holds the state at the same seq before any commits.
	if _, err := l.State(ctx, state.NewTasks()); err != nil {
		fmt.Println(err)
		return 1
	}
	proctest.AwaitBarrier(spec.Barrier)
	switch spec.Mode {
	case "race":
		mid := newID()
		_, err := l.Commit(ctx, store.Change{Validate: func(st *state.State) (*events.Event, error) {
			if st.Seq != 1 {
				return nil, fmt.Errorf("the log is at seq %d, taken: %w", st.Seq, crew.ErrConflict)
			}
			return steer(name, name, mid), nil
		}})
		return proctest.Outcome(err)
	case "commit":
		var n int
		fmt.Sscan(spec.Args[0], &n)
		var last int64
		for k := range n {
			reason := fmt.Sprintf("%s-%d", name, k)
			ev, err := commitSteer(ctx, l, name, reason)
			if err != nil {
				fmt.Println(err)
				return 1
			}
			if ev == nil || ev.Seq <= last || ev.Reason != reason {
				fmt.Printf("commit %s returned %+v after seq %d\n", reason, ev, last)
				return 1
			}
			last = ev.Seq
		}
		fmt.Println("ok")
	}
	return 0
}

// A waiter for participants wakes for the commits that concern them
// (state.Concerns), also one made before Wait and one made by another
// process, and not for the commits of others: a steer to t1 wakes t1's
// waiter, not t2's or the leader's.
func testWatchParticipants(t *testing.T, s Store) {
	ctx := proctest.Ctx(t)
	l := createLog(t, s)
	w1, w2, wl := l.Watch("t1"), l.Watch("t2"), l.Watch(state.Leader)
	defer w1.Close()
	defer w2.Close()
	defer wl.Close()
	if _, err := commitSteer(ctx, l, "self", "self-0"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := w1.Wait(wctx); err != nil {
		t.Errorf("t1's waiter, a steer to t1 committed after Watch, before Wait: %v; want a wake-up", err)
	}
	cancel()
	// Not woken: well before any safety-net rescan (seconds at least).
	for name, w := range map[string]store.Waiter{"t2": w2, state.Leader: wl} {
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		if err := w.Wait(wctx); err == nil {
			t.Errorf("%s's waiter woke for a steer to t1", name)
		}
		cancel()
	}
	// Another process's steer to t1 wakes t1's waiter.
	woke := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		woke <- w1.Wait(wctx)
	}()
	out := proctest.Spawn(t, 1, func(int) proctest.Spec {
		return proctest.Spec{Mode: "commit", Addr: s.Addr, Run: "r1", Name: "other", Args: []string{"1"}}
	}, nil)
	if strings.TrimSpace(out[0]) != "ok" {
		t.Fatalf("committing process: %q", out[0])
	}
	if err := <-woke; err != nil {
		t.Fatalf("t1's waiter was not woken by another process's steer to t1: %v", err)
	}
	// A report from t2 to the leader wakes t2's waiter and the leader's.
	id := newID()
	if _, err := l.Commit(ctx, store.Change{Validate: func(*state.State) (*events.Event, error) {
		return &events.Event{Type: events.MessageSent, Task: "t2", Actor: "t2",
			Message: &events.Message{ID: id, Task: "t2", Kind: events.KindReport, Direction: events.Outbox,
				From: "t2", To: "leader", Body: "done", Priority: events.DefaultPriority}}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]store.Waiter{"t2": w2, state.Leader: wl} {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := w.Wait(wctx); err != nil {
			t.Errorf("%s's waiter, t2's report to the leader: %v; want a wake-up", name, err)
		}
		cancel()
	}
}
