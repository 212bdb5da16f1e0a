package file_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gofrs/flock"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store/file"
	"github.com/crew-dev/crew/task"
)

// TestKeepLogs: with Store.KeepLogs, Open returns the run's one Log, whose
// next commit sees what another writer (a second Store: its own Log and
// its own hold of run.lock, as another process has) committed since; the
// run lock is not kept once the projections are written; a run directory
// replaced since is opened anew. Without it, each Open is a new Log.
func TestKeepLogs(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	other, err := run.Init(dir, crew.PrivatePerm)
	must(t, err)
	t.Cleanup(func() { other.Close() })
	keeping, err := run.Find(dir, crew.PrivatePerm)
	must(t, err)
	keeping.Store.(*file.Store).KeepLogs = true
	t.Cleanup(func() { keeping.Close() })
	if _, err := other.Create(run.CreateOptions{ID: "r1", Title: "first", Dir: dir}); err != nil {
		t.Fatal(err)
	}

	k1, err := keeping.Open("r1")
	must(t, err)
	k2, err := keeping.Open("r1")
	must(t, err)
	if k1.Log() != k2.Log() {
		t.Fatal("a second Open with KeepLogs made a new Log")
	}
	if a, b := reopenLog(t, other), reopenLog(t, other); a == b {
		t.Fatal("without KeepLogs, two Opens returned one Log")
	}

	// The kept Log commits (and keeps the state it reached), the other
	// writer moves the task on, and the kept Log's next commit is
	// validated against that: a pending task could not complete.
	_, err = k1.AddTask(ctx, "t1", state.TaskSpec{}, run.Leader)
	must(t, err)
	o, err := other.Open("r1")
	must(t, err)
	_, err = o.Transition(ctx, "t1", task.Start, "t1", "", nil)
	must(t, err)
	theirs, err := o.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: "from the other writer"})
	must(t, err)
	ours, err := k2.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: "from the kept Log"})
	if err != nil {
		t.Fatalf("steer a task another writer started, through the kept Log: %v", err)
	}
	if ours.Seq != theirs.Seq+1 {
		t.Fatalf("the kept Log's steer has seq %d after the other writer's %d; want the next", ours.Seq, theirs.Seq)
	}
	if _, err := k1.Transition(ctx, "t1", task.Complete, "t1", "", nil); err != nil {
		t.Fatalf("complete the task another writer started, through the kept Log: %v", err)
	}
	inbox, err := o.Inbox(ctx, "t1", run.InboxOptions{})
	must(t, err)
	if len(inbox) != 2 || inbox[0].ID != theirs.ID || inbox[1].ID != ours.ID {
		t.Fatalf("t1's inbox holds %d messages, want both steers in order", len(inbox))
	}

	// Once the projections are written (Close waits for them), run.lock
	// is free: the kept Log holds it no longer.
	must(t, other.Close())
	must(t, keeping.Close())
	lock := flock.New(filepath.Join(k1.Dir(), "run.lock"))
	if ok, err := lock.TryLock(); err != nil || !ok {
		t.Fatalf("run.lock after the kept Log's operations: taken %v, %v; want it free", ok, err)
	}
	must(t, lock.Unlock())

	// A run directory replaced (a run of the same id made anew) is
	// opened anew, its manifest read again.
	must(t, os.RemoveAll(k1.Dir()))
	if _, err := other.Create(run.CreateOptions{ID: "r1", Title: "second", Dir: dir}); err != nil {
		t.Fatal(err)
	}
	k3, err := keeping.Open("r1")
	must(t, err)
	if k3.Log() == k1.Log() || k3.Manifest.Title != "second" {
		t.Fatalf("after the run directory was replaced, Open returned the old Log (title %q)", k3.Manifest.Title)
	}
}

// reopenLog returns the Log of a new Open of run r1 in root.
func reopenLog(t *testing.T, root *run.Root) any {
	t.Helper()
	r, err := root.Open("r1")
	must(t, err)
	return r.Log()
}
