package file_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store/file"
)

// lingeringRun returns run r1, with a task t1, of a new state root whose
// Store keeps its Logs and the run lock for linger after its last user
// (as crew serve's and crew mcp's do).
func lingeringRun(t *testing.T, linger time.Duration) *run.Run {
	t.Helper()
	dir := t.TempDir()
	root, err := run.Init(dir, crew.PrivatePerm)
	must(t, err)
	s := root.Store.(*file.Store)
	s.KeepLogs, s.Linger = true, linger
	t.Cleanup(func() { root.Close() })
	r, err := root.Create(run.CreateOptions{ID: "r1", Title: "test", Dir: dir})
	must(t, err)
	_, err = r.AddTask(context.Background(), "t1", state.TaskSpec{}, run.Leader)
	must(t, err)
	return r
}

// lockFree reports whether run.lock of r can be taken now (by a lock of
// its own, as another process's writer takes it), giving it back at once.
func lockFree(t *testing.T, r *run.Run) bool {
	t.Helper()
	lock := flock.New(filepath.Join(r.Dir(), "run.lock"))
	ok, err := lock.TryLock()
	must(t, err)
	if ok {
		must(t, lock.Unlock())
	}
	return ok
}

// TestLingerKeepsLockUntilClose: with Store.Linger, the run lock is kept
// after an operation and its snapshots are done, so that the next one
// shares the lock epoch; Close lets it go. Without Linger it is free once
// they are done.
func TestLingerKeepsLockUntilClose(t *testing.T) {
	ctx := context.Background()
	for _, linger := range []time.Duration{0, time.Hour} {
		r := lingeringRun(t, linger)
		_, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: "steer"})
		must(t, err)
		r.Sync() // the snapshots written: the lock has no user left
		if free := lockFree(t, r); free != (linger == 0) {
			t.Fatalf("Linger %v: after an operation, run.lock free %v; want %v", linger, free, linger == 0)
		}
		must(t, r.Root().Close())
		if !lockFree(t, r) {
			t.Fatalf("Linger %v: after Close, run.lock is still held", linger)
		}
	}
}

// TestLingerLetsGo: a lock kept for Linger is let go once no operation
// came for that long, so another process's writer gets it, and this
// process's next operation follows what that writer committed.
func TestLingerLetsGo(t *testing.T) {
	ctx := context.Background()
	r := lingeringRun(t, 20*time.Millisecond)
	first, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: "kept"})
	must(t, err)
	for deadline := time.Now().Add(10 * time.Second); !lockFree(t, r); {
		if time.Now().After(deadline) {
			t.Fatal("run.lock still held 10 s after the last operation, with Linger 20 ms")
		}
		time.Sleep(5 * time.Millisecond)
	}
	other, err := run.Find(r.Dir(), crew.PrivatePerm) // another writer: a Store and a lock of its own
	must(t, err)
	t.Cleanup(func() { other.Close() })
	o, err := other.Open("r1")
	must(t, err)
	theirs, err := o.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: "the other writer's"})
	must(t, err)
	must(t, other.Close())
	ours, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: "kept again"})
	must(t, err)
	if theirs.Seq != first.Seq+1 || ours.Seq != theirs.Seq+1 {
		t.Fatalf("seqs %d, %d (the other writer's), %d; want them in a row", first.Seq, theirs.Seq, ours.Seq)
	}
	r.Sync()
	checkMailboxes(t, r, "after the other writer")
}

// TestLingerChecksChangesByHand: while the lock is kept with no
// operation under way (Linger), a change made by hand to the run's files
// (a mail directory removed, a mailbox file's last line cut) is seen by
// the next operation, as when the lock was let go: the operations that
// used the epoch have returned.
func TestLingerChecksChangesByHand(t *testing.T) {
	ctx := context.Background()
	r := lingeringRun(t, time.Hour)
	for i := range 20 {
		_, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: fmt.Sprint("a ", i)})
		must(t, err)
		r.Sync()
		if lockFree(t, r) {
			t.Fatal("run.lock free between operations with Linger")
		}
		if i%2 == 0 {
			must(t, os.RemoveAll(tree(r).Dir("t1")))
		} else {
			path := fl(r).MailboxPath(mailbox.SteeringFile)
			data, err := os.ReadFile(path)
			must(t, err)
			must(t, os.WriteFile(path, data[:bytes.LastIndexByte(data[:len(data)-1], '\n')+1], 0o600))
		}
		m, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: fmt.Sprint("b ", i)})
		must(t, err)
		if _, err := tree(r).Find("t1", m.ID); err != nil {
			t.Fatalf("round %d: the copy of %s for t1: %v", i, m.ID, err)
		}
		checkMailboxes(t, r, fmt.Sprintf("round %d", i))
	}
}

// TestLingerChecksLogAfterRefusal: an operation refused (nothing
// committed, nothing to project) is the last user of a kept lock too: a
// torn line added to events.jsonl by hand after it is cut by the next
// operation, which checks the log before it writes through the writer it
// kept open.
func TestLingerChecksLogAfterRefusal(t *testing.T) {
	ctx := context.Background()
	r := lingeringRun(t, time.Hour)
	torn := `{"seq":` + strings.Repeat("9", 4000)
	for i := range 10 {
		_, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: fmt.Sprint("a ", i)})
		must(t, err)
		r.Sync()
		if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "nobody", From: run.Leader, Body: "refused"}); err == nil {
			t.Fatal("a steer to a task the run does not have was committed")
		}
		f, err := os.OpenFile(fl(r).EventsPath(), os.O_WRONLY|os.O_APPEND, 0)
		must(t, err)
		_, err = f.WriteString(torn)
		must(t, err)
		must(t, f.Close())
		m, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: fmt.Sprint("b ", i)})
		must(t, err)
		data, err := os.ReadFile(fl(r).EventsPath())
		must(t, err)
		if !bytes.HasSuffix(data, []byte("\n")) || !bytes.Contains(data[bytes.LastIndexByte(data[:len(data)-1], '\n')+1:], []byte(m.ID)) {
			t.Fatalf("round %d: events.jsonl does not end with the event of %s: it ends %q", i, m.ID, data[max(0, len(data)-200):])
		}
	}
}

// TestLingerYieldsToAnotherWriter: while this process's operations come
// back to back, closer than Linger, a writer of another process waiting
// for the lock still gets it (the lingered epoch is bounded), and this
// process goes on after it.
func TestLingerYieldsToAnotherWriter(t *testing.T) {
	ctx := context.Background()
	r := lingeringRun(t, 50*time.Millisecond)
	done := make(chan struct{})
	busy := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				busy <- nil
				return
			default:
			}
			if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: fmt.Sprint("burst ", i)}); err != nil {
				busy <- err
				return
			}
		}
	}()
	other, err := run.Find(r.Dir(), crew.PrivatePerm)
	must(t, err)
	t.Cleanup(func() { other.Close() })
	o, err := other.Open("r1")
	must(t, err)
	sent := make(chan error, 1)
	go func() {
		_, err := o.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: "the other writer's"})
		sent <- err
	}()
	select {
	case err := <-sent:
		must(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("another writer did not get the run lock in 20 s while this process's operations came back to back")
	}
	must(t, other.Close())
	close(done)
	must(t, <-busy)
	r.Sync()
	checkMailboxes(t, r, "after the burst")
}
