package nats

import (
	"context"
	"errors"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
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
	announced(t, s, "t1", 1) // t1 has a record (as its task.created leaves it)
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

// An append announced before the waiter subscribed (its record not
// handed to the waiter), and stored after the baseline's look (the
// writer slow between the two, or its record stored late), is still
// found by the backstop: the seq after the head the look read is kept
// pending, and read once the log holds it. Until then a look reads no
// event and wakes no one, whatever the records say; once the log grew,
// a changed record wakes the owner.
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
	// Announced after the look: nothing to wake for until it is stored.
	announced(t, s, "t1", 3)
	if ww.missed(ctx) {
		t.Fatal("a rescan woke its owner for a record whose event is not in the log")
	}
	appendBare(t, s, taskCreated(3, "t1"))
	if !ww.missed(ctx) {
		t.Fatal("a rescan missed t1's event appended after the look that saw its record")
	}
	// Past the pending seq: another task's event there, t1's after it;
	// t1's changed record says so.
	appendBare(t, s, taskCreated(4, "t2"))
	announced(t, s, "t1", 5)
	appendBare(t, s, taskCreated(5, "t1"))
	if !ww.missed(ctx) {
		t.Fatal("a rescan missed t1's event past the pending seq, its record changed")
	}
	if ww.missed(ctx) {
		t.Fatal("a rescan woke its owner twice for one event")
	}
	// The pending seq held another task's event: nothing to wake for.
	appendBare(t, s, taskCreated(6, "t2"))
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
	announced(t, s, "t3", 1)
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

// setWakeRescan sets the backstop's period for the waiters made until
// the test ends.
func setWakeRescan(t *testing.T, d time.Duration) {
	was := wakeRescan
	wakeRescan = d
	t.Cleanup(func() { wakeRescan = was })
}

// waitFor runs w.Wait for up to d and returns its error.
func waitFor(w store.Waiter, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return w.Wait(ctx)
}

// A waiter whose wake-up was lost (its writer died after the append) is
// woken through its subscription to the wake records: the announced seq,
// unconfirmed after dueGrace, is looked for in the log, with no backstop
// look (its period an hour here). So it is on a server without
// WakeStream: the records are core NATS messages first.
func TestWakeThroughRecordWithoutRescan(t *testing.T) {
	setWakeRescan(t, time.Hour)
	for _, stream := range []bool{true, false} {
		s := wakeRun(t)
		if !stream {
			if err := s.js.DeleteStream(context.Background(), WakeStream); err != nil {
				t.Fatal(err)
			}
		}
		ww := watchTask(t, s, "t1")
		appendLost(t, s, taskCreated(2, "t2")) // another's: no record for t1
		appendLost(t, s, taskCreated(3, "t1"))
		start := time.Now()
		if err := waitFor(ww, 10*time.Second); err != nil {
			t.Fatalf("stream %v: a waiter whose wake-up was lost was not woken through its record: %v", stream, err)
		}
		if d := time.Since(start); d < dueGrace/2 {
			t.Fatalf("stream %v: woken after %s, before its record was due: by a wake-up that should have been lost", stream, d)
		}
		if ww.looks != 0 || ww.dueLooks == 0 {
			t.Fatalf("stream %v: %d backstop looks and %d looks for announced seqs, want 0 and some", stream, ww.looks, ww.dueLooks)
		}
		ww.mu.Lock()
		due := slices.Clone(ww.due)
		ww.mu.Unlock()
		if len(due) != 0 {
			t.Fatalf("stream %v: still due after the log held them: %v", stream, due)
		}
	}
}

// A record the waiter never got (its subscription lost it: a
// reconnection, a route between servers that broke) is found by the
// backstop: first at the pending seq after the Watch's look, then, past
// it, by the changed record.
func TestWakeLostRecordFoundByBackstop(t *testing.T) {
	setWakeRescan(t, 200*time.Millisecond)
	s := wakeRun(t)
	ww := watchTask(t, s, "t1")
	for _, sub := range ww.subs {
		if strings.HasSuffix(sub.Subject, ".due") {
			sub.Unsubscribe()
		}
	}
	appendLost(t, s, taskCreated(2, "t1"))
	if err := waitFor(ww, 5*time.Second); err != nil {
		t.Fatalf("the backstop missed t1's event at the pending seq: %v", err)
	}
	looks := ww.looks
	if looks == 0 || ww.dueLooks != 0 {
		t.Fatalf("%d backstop looks and %d looks for records, want some and none", looks, ww.dueLooks)
	}
	appendLost(t, s, taskCreated(3, "t2"))
	appendLost(t, s, taskCreated(4, "t1"))
	if err := waitFor(ww, 5*time.Second); err != nil {
		t.Fatalf("the backstop missed t1's event past the pending seq: %v", err)
	}
	if err := waitFor(ww, time.Second); err == nil {
		t.Fatal("the backstop woke its owner again with nothing new")
	}
}

// The backstop's first look is due within its period (2 minutes,
// docs/nats.md, Wake records), no sooner than half of it, at a random
// moment: waiters made together do not look together. A young waiter
// does not look sooner (the bench's window of a fan-out's idle waiters
// held their looks at 5, 15 and 35 s).
func TestWakeBackstopSchedule(t *testing.T) {
	if wakeRescan != 2*time.Minute {
		t.Fatalf("the backstop's period is %v; docs/nats.md and the package doc say 2 minutes", wakeRescan)
	}
	s := wakeRun(t)
	at := map[time.Duration]bool{}
	for range 20 {
		made := time.Now()
		ww := watchTask(t, s, "t1")
		d := ww.next.Sub(made)
		ww.Close()
		if d < time.Minute || d > 2*time.Minute+time.Second {
			t.Errorf("a new waiter's first look is due in %v; want 60–120 s", d)
		}
		at[d.Truncate(time.Second)] = true
	}
	if len(at) < 5 {
		t.Errorf("20 waiters made together look first in only %d different seconds", len(at))
	}
}

// An announced seq the log does not hold yet (a writer slow to append,
// or dead before it) is looked for at doubling intervals, one message
// get a look, until the log holds it: a rival's event there (it lost
// the compare-and-swap) wakes no one; a wake-up that names it or a later
// seq ends it without a look.
func TestWakeDueSchedule(t *testing.T) {
	setWakeRescan(t, time.Hour)
	s := wakeRun(t)
	ww := watchTask(t, s, "t1")
	s.announce(taskCreated(2, "t1")) // never appended by its writer
	if err := waitFor(ww, 3500*time.Millisecond); err == nil {
		t.Fatal("a waiter woke for an announced seq the log does not hold")
	}
	// Looks at 1 s and 3 s (1 + 2), the next due 4 s later.
	if ww.dueLooks != 2 {
		t.Fatalf("%d looks for the announced seq in 3.5 s, want 2 (at 1 s and 3 s)", ww.dueLooks)
	}
	ww.mu.Lock()
	gap := ww.dueGap
	ww.mu.Unlock()
	if gap != 4*time.Second {
		t.Fatalf("the next look in %v, want 4 s", gap)
	}
	appendLost(t, s, taskCreated(2, "t2")) // a rival took seq 2
	ww.mu.Lock()
	ww.dueAt = time.Now()
	ww.mu.Unlock()
	if err := waitFor(ww, 2*time.Second); err == nil {
		t.Fatal("a waiter woke for a rival's event at its announced seq")
	}
	ww.mu.Lock()
	due, at := slices.Clone(ww.due), ww.dueAt
	ww.mu.Unlock()
	if len(due) != 0 || !at.IsZero() {
		t.Fatalf("due %v at %v after the log held the seq, want none", due, at)
	}
	// A wake-up confirms what it names and all before: no look follows.
	s.announce(taskCreated(3, "t1"))
	s.announce(taskCreated(4, "t1"))
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		ww.mu.Lock()
		n := len(ww.due)
		ww.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%d announced seqs due, want 2", n)
		}
	}
	s.notify("r1", []*events.Event{taskCreated(4, "t1")})
	if err := waitFor(ww, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	looks := ww.dueLooks
	if err := waitFor(ww, 2*dueGrace+time.Second/2); err == nil {
		t.Fatal("a waiter woke again after a wake-up confirmed its announced seqs")
	}
	ww.mu.Lock()
	due = slices.Clone(ww.due)
	ww.mu.Unlock()
	if len(due) != 0 || ww.dueLooks != looks {
		t.Fatalf("due %v after a wake-up named the last of them (%d looks since), want none", due, ww.dueLooks-looks)
	}
}

// Across a reconnection (the server restarted: WakeStream, in memory,
// is gone) the waiter is woken once for what it may have missed, and
// its subscriptions come back: a lost wake-up is still found through
// its record.
func TestWakeThroughRecordAfterReconnect(t *testing.T) {
	setWakeRescan(t, time.Hour)
	srv := natstest.Server(t)
	s := testDial(t, srv.ClientURL())
	ctx := context.Background()
	if err := s.CreateRun(ctx, &events.Event{Seq: 1, At: events.Now(), Type: events.RunCreated, Run: "r1", Actor: "leader", Data: []byte(`{"id":"r1","leader":"leader"}`)}); err != nil {
		t.Fatal(err)
	}
	ww := watchTask(t, s, "t1")
	natstest.Restart(t, srv)
	if err := waitFor(ww, 10*time.Second); err != nil {
		t.Fatalf("a reconnection did not wake the waiter: %v", err)
	}
	if err := s.nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	appendLost(t, s, taskCreated(2, "t1"))
	if err := waitFor(ww, 10*time.Second); err != nil {
		t.Fatalf("after a reconnection a lost wake-up was not found through its record: %v", err)
	}
	if ww.looks != 0 || ww.dueLooks == 0 {
		t.Fatalf("%d backstop looks and %d looks for records, want 0 and some", ww.looks, ww.dueLooks)
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

// A flood of wake records (any member may publish every participant's)
// pushes no participant's record out of WakeStream: once it is full it
// refuses records on new subjects and still takes a participant's next
// record in place of its last (DiscardNew, records of one length). So
// a waiter whose wake-up and record delivery were both lost finds its
// event at its next look; and a waiter whose participant's record was
// refused (the stream full) reads the log. With DiscardOld, a worker's
// flood pushed t1's record out and t1's waiter never saw its event
// (breaker2).
func TestWakeRecordsNotPushedOut(t *testing.T) {
	old := wakeStreamBytes
	wakeStreamBytes = 8 << 10
	t.Cleanup(func() { wakeStreamBytes = old })
	s := wakeRun(t)
	ctx := context.Background()
	appendLost(t, s, taskCreated(2, "t1"))
	announced(t, s, "t1", 2) // (its record is stored)
	w1 := watchTask(t, s, "t1")
	if w1.byLog {
		t.Fatal("t1 has a record, but its waiter reads the log")
	}
	// The flood: records on new subjects until the stream refuses one,
	// and a larger one, refused at once.
	if _, err := s.js.Publish(ctx, DueSubject("x", "big"), make([]byte, 1<<10)); err == nil {
		t.Fatal("WakeStream took a record larger than wakeRecordLen")
	}
	for i := 0; ; i++ {
		if i == 10000 {
			t.Fatal("WakeStream never filled")
		}
		if _, err := s.js.Publish(ctx, DueSubject("x", "p"+strconv.Itoa(i)), wakeRecordData(int64(i+1))); err != nil {
			break
		}
	}
	// t5 is created with the stream full: its record is refused.
	appendLost(t, s, taskCreated(3, "t5"))
	if r, err := s.wakeRecordOf(ctx, "r1", "t5"); err != nil || r != (wakeRecord{}) {
		t.Fatalf("t5's record in a full stream: %+v, %v", r, err)
	}
	w5 := watchTask(t, s, "t5")
	if !w5.byLog {
		t.Fatal("t5 has no record, but its waiter judges by records")
	}
	// Another task's event first, so that t1's is not the one after
	// the baseline's head: only t1's record can tell.
	appendLost(t, s, taskCreated(4, "t4"))
	appendLost(t, s, taskCreated(5, "t1"))
	if !w1.missed(ctx) {
		t.Fatal("t1's waiter missed its event: its record was pushed out or refused")
	}
	appendLost(t, s, taskCreated(6, "t5"))
	if !w5.missed(ctx) {
		t.Fatal("t5's waiter missed its event")
	}
	// A stream an earlier crew made (the oldest records going first) is
	// not trusted: a Store that did not make it reads the log.
	if err := s.js.DeleteStream(ctx, WakeStream); err != nil {
		t.Fatal(err)
	}
	if _, err := s.js.CreateStream(ctx, jetstream.StreamConfig{Name: WakeStream, Subjects: []string{DueSubject("*", "*")}, Storage: jetstream.MemoryStorage, MaxMsgsPerSubject: 1, Discard: jetstream.DiscardOld}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.js.Publish(ctx, DueSubject("r1", "t1"), wakeRecordData(1)); err != nil {
		t.Fatal(err)
	}
	s2 := testDial(t, s.nc.ConnectedUrl())
	if w := watchTask(t, s2, "t1"); !w.byLog {
		t.Fatal("a waiter judges by the records of a stream that pushes the oldest out")
	}
}

// A Wait whose context ends as a look is due returns the context's
// error, never a wake-up: the look's requests fail with the context,
// and a failed look otherwise says yes (its owner looks for itself).
func TestWaitEndedAtALook(t *testing.T) {
	s := wakeRun(t)
	ww := watchTask(t, s, "t1") // no record for t1: its looks read the log
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 50 {
		ww.next = time.Now().Add(-time.Second) // the backstop's look is due
		if err := ww.Wait(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait %d with its context ended: %v, want context.Canceled", i, err)
		}
	}
	if ww.looks == 0 {
		t.Fatal("no look ran: the test tried nothing")
	}
}
