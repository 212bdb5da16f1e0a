//go:build unix

package file_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store/file"
	"github.com/crew-dev/crew/task"
)

// TestLostWakeUpFoundByRescan: a worker in ask --wait whose wake-up was
// lost (its FIFO's name gone before the leader's respond, so the writer
// pokes no one: as if it had been killed between its fsync and its
// pokes, with no commit after it) still gets its answer, from the
// safety-net rescan, within the rescan's period: the documented bound
// (docs/files.md, Wake-ups), here shortened. A waiter for another task
// is not woken by the rescan.
func TestLostWakeUpFoundByRescan(t *testing.T) {
	const period = 500 * time.Millisecond
	file.SetWakeRescan(t, period)
	r := newTestRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, id := range []string{"t1", "t2"} {
		_, err := r.AddTask(ctx, id, state.TaskSpec{Title: "task " + id}, run.Leader)
		must(t, err)
		_, err = r.Transition(ctx, id, task.Start, id, "", nil)
		must(t, err)
	}
	// tasks.json current: the worker's first commit then has nothing to
	// catch up, whose pokes (t2's task events among them) would wake t2's
	// waiter (a long-lived Log writes tasks.json every 128 of its events
	// or once idle, docs/files.md, Snapshots).
	r.Sync()
	other := fl(r).Watch("t2")
	defer other.Close()

	type asked struct {
		m   *events.Message
		err error
		at  time.Time
	}
	got := make(chan asked, 1)
	worker := reopen(t, r) // another process's Log
	go func() {
		_, m, err := worker.Ask(ctx, run.SendOptions{Task: "t1", From: "t1", Body: "Which database?"}, true)
		got <- asked{m, err, time.Now()}
	}()
	// Once t1's waiter is linked under wake/t1/, its names go: no writer
	// finds it to poke.
	dir := filepath.Join(fl(r).WakeDir(), "t1")
	for {
		ents, _ := os.ReadDir(dir)
		removed := 0
		for _, e := range ents {
			if e.Type() == os.ModeNamedPipe && e.Name()[0] != '.' {
				must(t, os.Remove(filepath.Join(dir, e.Name())))
				removed++
			}
		}
		if removed > 0 {
			break
		}
		select {
		case a := <-got:
			t.Fatalf("ask --wait returned before the answer: %v %v", a.m, a.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	st, err := r.State()
	must(t, err)
	if st.Tasks["t1"].Status != task.Waiting {
		t.Fatalf("t1 is %s, want waiting", st.Tasks["t1"].Status)
	}
	sent := time.Now()
	_, err = r.Send(ctx, run.SendOptions{Kind: events.KindResponse, Task: "t1", From: run.Leader, Body: "Use Postgres."})
	must(t, err)
	a := <-got
	if a.err != nil || a.m == nil || a.m.Body != "Use Postgres." {
		t.Fatalf("ask --wait whose wake-up was lost: %+v, %v; want the answer", a.m, a.err)
	}
	// Within the period (one rescan), with room for a loaded machine.
	if late := a.at.Sub(sent); late > period+time.Second {
		t.Errorf("the answer whose wake-up was lost came %v after the respond; the bound is the rescan's period, %v", late, period)
	}
	// t2's waiter rescanned the same growth (t1's question and answer)
	// and was not woken: no line names t2.
	wctx, wcancel := context.WithTimeout(ctx, 2*period)
	defer wcancel()
	if err := other.Wait(wctx); err == nil {
		t.Error("t2's waiter was woken by a rescan of t1's events")
	}
}

// TestWakeRescanSchedule: a waiter's first rescan is due within the
// documented bound (60 s, docs/files.md, Wake-ups), no sooner than half
// of it, at a random moment: waiters made together do not rescan
// together.
func TestWakeRescanSchedule(t *testing.T) {
	if p := file.WakeRescan(); p != time.Minute {
		t.Fatalf("the rescan's period is %v; docs/files.md and the package doc say 60 s", p)
	}
	r := newTestRun(t)
	due := map[time.Duration]bool{}
	for range 20 {
		made := time.Now()
		w := fl(r).Watch("t1")
		d := file.WakeDue(w).Sub(made)
		w.Close()
		if d < 30*time.Second || d > time.Minute+time.Second {
			t.Errorf("a new waiter's first rescan is due in %v; want 30–60 s", d)
		}
		due[d.Truncate(time.Second)] = true
	}
	if len(due) < 5 {
		t.Errorf("20 waiters made together rescan first in only %d different seconds", len(due))
	}
}

// TestWakeDoesNotFollowLinks: with wake/<participant> a symbolic link to a
// directory outside the state root, a commit that concerns the participant
// neither writes into the FIFOs there nor removes them; with wake/ itself
// a link, crew repair leaves them too (docs/files.md, Wake-ups). Found by
// the breaker: both went through the link.
func TestWakeDoesNotFollowLinks(t *testing.T) {
	ctx := context.Background()
	r := newTestRun(t)
	_, err := r.AddTask(ctx, "t1", state.TaskSpec{Title: "task t1"}, run.Leader)
	must(t, err)
	elsewhere := t.TempDir()
	stale := filepath.Join(elsewhere, "stale.fifo") // no reader: a poke or a tidy would remove it
	must(t, unix.Mkfifo(stale, 0o600))
	live := filepath.Join(elsewhere, "live.fifo") // a reader: a poke would write into it
	must(t, unix.Mkfifo(live, 0o600))
	reader, err := unix.Open(live, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(reader)

	wake := fl(r).WakeDir()
	must(t, os.MkdirAll(wake, 0o700))
	must(t, os.Symlink(elsewhere, filepath.Join(wake, "t1")))
	_, err = r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: "poke"})
	must(t, err)
	if _, err := os.Lstat(stale); err != nil {
		t.Errorf("a FIFO behind the link wake/t1 was removed by a poke: %v", err)
	}
	if n, _ := unix.Read(reader, make([]byte, 8)); n > 0 { // EAGAIN when nothing was written
		t.Error("a FIFO behind the link wake/t1 was poked")
	}

	must(t, os.RemoveAll(wake))
	must(t, os.MkdirAll(filepath.Join(elsewhere, "t1"), 0o700))
	must(t, unix.Mkfifo(filepath.Join(elsewhere, "t1", "1-stale"), 0o600))
	must(t, os.Symlink(elsewhere, wake))
	rep, err := r.Repair(ctx)
	must(t, err)
	if rep.WakeRemoved != 0 {
		t.Errorf("crew repair removed %d FIFOs behind the link wake/", rep.WakeRemoved)
	}
	for _, f := range []string{stale, filepath.Join(elsewhere, "t1", "1-stale")} {
		if _, err := os.Lstat(f); err != nil {
			t.Errorf("crew repair removed %s behind the link wake/: %v", f, err)
		}
	}
}
