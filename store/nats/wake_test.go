package nats

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
)

// wakeRun creates run r1 on a new server and returns a store on it.
func wakeRun(t *testing.T) *Store {
	t.Helper()
	srv := natstest.Server(t)
	s := testDial(t, srv.ClientURL())
	if err := s.CreateRun(context.Background(), &events.Event{Seq: 1, At: events.Now(), Type: events.RunCreated, Run: "r1", Actor: "leader", Data: []byte(`{"id":"r1","leader":"leader"}`)}); err != nil {
		t.Fatal(err)
	}
	return s
}

// watchTask starts a waiter for task's wake-ups in run r1.
func watchTask(t *testing.T, s *Store, task string) *wakeWaiter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), watchTimeout)
	defer cancel()
	w, err := s.watchFor(ctx, "r1", []string{task})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w.(*wakeWaiter)
}

// taskCreated is a task.created event for task at seq in run r1.
func taskCreated(seq int64, task string) *events.Event {
	return &events.Event{Seq: seq, At: events.Now(), Type: events.TaskCreated, Run: "r1", Task: task, Actor: "leader", To: "pending", Data: []byte(`{"agent":"` + task + `"}`)}
}

// appendLost appends e with Store.Append, which publishes its wake
// records but no wake-up: as if its writer died before it did.
func appendLost(t *testing.T, s *Store, e *events.Event) {
	t.Helper()
	if err := s.Append(context.Background(), e, "op-"+e.Task+"-"+strconv.FormatInt(e.Seq, 10)); err != nil {
		t.Fatal(err)
	}
}

// appendBare appends e without its wake records or wake-up, as a writer
// whose records the server has not stored yet.
func appendBare(t *testing.T, s *Store, e *events.Event) {
	t.Helper()
	line, err := events.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.js.Publish(context.Background(), Subject("r1", e.Actor), line[:len(line)-1], jetstream.WithExpectLastSequence(uint64(e.Seq-1))); err != nil {
		t.Fatal(err)
	}
}

// announced publishes task's wake record for seq, as a writer does
// before its append, and waits until the server holds it.
func announced(t *testing.T, s *Store, task string, seq int64) {
	t.Helper()
	ctx := context.Background()
	before, err := s.wakeRecordOf(ctx, "r1", task)
	if err != nil {
		t.Fatal(err)
	}
	s.announce(taskCreated(seq, task))
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if r, err := s.wakeRecordOf(ctx, "r1", task); err == nil && r != before {
			return
		}
	}
	t.Fatalf("the server never stored %s's wake record", task)
}

// The safety-net rescan wakes a waiter for an event that concerns it
// whose wake-up was lost (appended, never published), and not for the
// others' events; and it reads no event to tell: a look at the
// participant's wake record (WakeStream) is all an idle rescan costs,
// however much the log grew. Reading the others' events had every idle
// waiter of a busy run decode them at its rescans.
func TestWakeRescanWakesOnlyForItsOwn(t *testing.T) {
	s := wakeRun(t)
	ctx := context.Background()
	ww := watchTask(t, s, "t1")
	if ww.byLog {
		t.Fatal("the waiter reads the log: no wake stream")
	}
	if ww.missed(ctx) {
		t.Fatal("a rescan of a log that did not grow woke its owner")
	}
	seq := int64(2)
	for _, other := range []string{"t2", "t3", "t4"} {
		appendLost(t, s, taskCreated(seq, other))
		seq++
	}
	read := s.EventsRead()
	for range 3 {
		if ww.missed(ctx) {
			t.Fatal("a rescan woke t1's waiter for other tasks' events")
		}
	}
	if n := s.EventsRead() - read; n > 0 {
		t.Fatalf("idle rescans read %d events of the log, want none", n)
	}
	appendLost(t, s, taskCreated(seq, "t1"))
	appendLost(t, s, taskCreated(seq+1, "t5"))
	if !ww.missed(ctx) {
		t.Fatal("a rescan missed an event for t1 whose wake-up was lost")
	}
	if ww.missed(ctx) {
		t.Fatal("a rescan woke its owner twice for one event")
	}
}

// An append announced before a rescan's look, and stored after it (the
// writer slow between the two, or its record stored late), is still
// found: the seq after the head the look read is kept pending, and read
// once the log holds it.
func TestWakeRescanAppendInFlight(t *testing.T) {
	s := wakeRun(t)
	ctx := context.Background()
	// At the Watch: announced, not yet appended.
	announced(t, s, "t1", 2)
	ww := watchTask(t, s, "t1")
	if ww.missed(ctx) {
		t.Fatal("a rescan woke its owner before the announced event was appended")
	}
	appendBare(t, s, taskCreated(2, "t1"))
	if !ww.missed(ctx) {
		t.Fatal("a rescan missed t1's event announced before the Watch, appended after it")
	}
	if ww.missed(ctx) {
		t.Fatal("a rescan woke its owner twice for one event")
	}
	// Between two rescans: the record changes (its owner is woken and
	// reads), and the event lands after that.
	announced(t, s, "t1", 3)
	if !ww.missed(ctx) {
		t.Fatal("a rescan did not wake its owner for t1's changed record")
	}
	appendBare(t, s, taskCreated(3, "t1"))
	if !ww.missed(ctx) {
		t.Fatal("a rescan missed t1's event appended after the look that saw its record")
	}
	// The pending seq held another task's event: nothing to wake for.
	announced(t, s, "t1", 4)
	if !ww.missed(ctx) {
		t.Fatal("a rescan did not wake its owner for t1's changed record")
	}
	appendBare(t, s, taskCreated(4, "t2"))
	if ww.missed(ctx) {
		t.Fatal("a rescan woke t1's waiter for t2's event")
	}
}

// On a server without WakeStream (a run made before it, the stream
// deleted) the rescan reads the log, and still wakes only for its own.
func TestWakeRescanWithoutWakeStream(t *testing.T) {
	s := wakeRun(t)
	ctx := context.Background()
	if err := s.js.DeleteStream(ctx, WakeStream); err != nil {
		t.Fatal(err)
	}
	ww := watchTask(t, s, "t1")
	if !ww.byLog {
		t.Fatal("no wake stream, but the waiter does not read the log")
	}
	appendLost(t, s, taskCreated(2, "t2"))
	if ww.missed(ctx) {
		t.Fatal("a rescan woke t1's waiter for another task's event")
	}
	appendLost(t, s, taskCreated(3, "t1"))
	if !ww.missed(ctx) {
		t.Fatal("a rescan missed an event for t1 whose wake-up was lost")
	}
	if ww.missed(ctx) {
		t.Fatal("a rescan woke its owner twice for one event")
	}
	// A stream that goes away under a waiter: from then on, the log.
	s.ensureWakeStream(ctx)
	w2 := watchTask(t, s, "t3")
	if w2.byLog {
		t.Fatal("the waiter reads the log: no wake stream")
	}
	if err := s.js.DeleteStream(ctx, WakeStream); err != nil {
		t.Fatal(err)
	}
	appendLost(t, s, taskCreated(4, "t3"))
	if !w2.missed(ctx) || !w2.byLog {
		t.Fatal("a rescan whose wake stream was deleted missed an event for t3")
	}
}

// A waiter whose wake-up was lost gets its event from the first rescan,
// wakeRescan after it began to wait (docs/nats.md, Waiting).
func TestWakeLostWithinFirstRescan(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a rescan")
	}
	s := wakeRun(t)
	l := newTestLog(s)
	w := l.Watch("t1")
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wakeRescan+5*time.Second)
	defer cancel()
	start := time.Now()
	appendLost(t, s, taskCreated(2, "t1"))
	if err := w.Wait(ctx); err != nil {
		t.Fatalf("a waiter whose wake-up was lost was not woken within %s: %v", wakeRescan+5*time.Second, err)
	}
	if d := time.Since(start); d < wakeRescan-time.Second {
		t.Fatalf("woken after %s, before the first rescan: by a wake-up that should have been lost", d)
	}
}

// A wake-up names the seq of the event that concerns its waiter
// (store.Hinter), where an owner looks first.
func TestWakeHintNamesTheEvent(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	s := testDial(t, srv.ClientURL())
	if err := s.CreateRun(ctx, &events.Event{Seq: 1, At: events.Now(), Type: events.RunCreated, Run: "r1", Actor: "leader", Data: []byte(`{"id":"r1","leader":"leader"}`)}); err != nil {
		t.Fatal(err)
	}
	l := newTestLog(s)
	w := l.Watch("t2")
	defer w.Close()
	for _, task := range []string{"t1", "t2", "t3"} {
		if _, err := l.Commit(ctx, store.Change{Validate: func(*state.State) (*events.Event, error) {
			return &events.Event{Type: events.TaskCreated, Task: task, Actor: "leader", To: "pending", Data: []byte(`{"agent":"` + task + `"}`)}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	h := w.(store.Hinter)
	if got := h.Hint(); got != 3 {
		t.Fatalf("Hint() = %d, want 3 (t2's task.created)", got)
	}
	if got := h.Hint(); got != 0 {
		t.Fatalf("Hint() again = %d, want 0", got)
	}
}

// gogc is the collector's GOGC setting now (-1: off).
func gogc() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// A quiet wait (Options.QuietWaits) turns the collector's schedule off
// while it blocks, with a memory limit above what the process holds, and
// the last of several waits to end puts both back.
func TestQuietWaitTurnsCollectorOff(t *testing.T) {
	before, limit := gogc(), debug.SetMemoryLimit(-1)
	end1 := quietBegin()
	end2 := quietBegin()
	if g := gogc(); g != -1 {
		t.Fatalf("during a quiet wait GOGC is %d, want off", g)
	}
	if l := debug.SetMemoryLimit(-1); l >= limit || l <= 0 {
		t.Fatalf("during a quiet wait the memory limit is %d, want one below %d", l, limit)
	}
	end1()
	if g := gogc(); g != -1 {
		t.Fatalf("one of two quiet waits ended: GOGC is %d, want still off", g)
	}
	end2()
	if g, l := gogc(), debug.SetMemoryLimit(-1); g != before || l != limit {
		t.Fatalf("after the quiet waits GOGC %d and limit %d, want %d and %d", g, l, before, limit)
	}

	// A waiter of a store with QuietWaits.
	s := wakeRun(t)
	s.opts.QuietWaits = true
	ww := watchTask(t, s, "t1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- ww.Wait(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for gogc() != -1 {
		if time.Now().After(deadline) {
			t.Fatal("a quiet waiter's Wait did not turn the collector off")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if g := gogc(); g != before {
		t.Fatalf("after a quiet waiter's Wait GOGC is %d, want %d", g, before)
	}
}
