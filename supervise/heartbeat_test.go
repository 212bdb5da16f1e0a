package supervise

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// A worker's reading command (Alive without create) makes no heartbeat
// file; Heartbeat does, with the root's file mode, and a heartbeat is a
// sign of life that Liveness sees; an unknown task is crew.ErrNotFound.
func TestHeartbeat(t *testing.T) {
	r := newTestRun(t)
	ctx := context.Background()
	_, err := r.AddTask(ctx, "t1", state.TaskSpec{}, run.Leader)
	must(t, err)
	_, err = r.Transition(ctx, "t1", task.Start, "t1", "", nil)
	must(t, err)
	beat := filepath.Join(r.Dir(), "workers", "t1.alive")

	Alive(r, "t1", false)
	if _, err := os.Stat(beat); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Alive without create: %s: %v, want no file", beat, err)
	}
	if err := Heartbeat(r, "t9"); !errors.Is(err, crew.ErrNotFound) {
		t.Fatalf("Heartbeat of an unknown task = %v, want not found", err)
	}
	must(t, Heartbeat(r, "t1"))
	fi, err := os.Stat(beat)
	must(t, err)
	if fi.Mode().Perm() != crew.PrivatePerm.File {
		t.Fatalf("%s has mode %v, want %v", beat, fi.Mode().Perm(), crew.PrivatePerm.File)
	}
	st, err := r.TaskState()
	must(t, err)
	l := Liveness(r, st, time.Minute, time.Now().Add(time.Hour))["t1"]
	if l == nil || l.State != run.LiveQuiet || !l.Since.Equal(fi.ModTime().UTC().Truncate(time.Millisecond)) {
		t.Fatalf("liveness an hour after the heartbeat at %s: %+v, want quiet since it", fi.ModTime(), l)
	}
}

// TestHeartbeatOfAKnownTaskReadsNoState: once a task has its heartbeat
// file, Heartbeat only touches it: it succeeds with the run's log and
// snapshots moved away, which a read of the run's tasks would fail on,
// and its cost does not grow with the run. An unknown task still reads
// the state, and fails with it.
func TestHeartbeatOfAKnownTaskReadsNoState(t *testing.T) {
	r := newTestRun(t)
	_, err := r.AddTask(context.Background(), "t1", state.TaskSpec{}, run.Leader)
	must(t, err)
	must(t, Heartbeat(r, "t1"))
	beat := filepath.Join(r.Dir(), "workers", "t1.alive")
	long := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(beat, long, long))

	away := t.TempDir()
	for _, name := range []string{"events.jsonl", "tasks.json", "open.jsonl"} {
		if err := os.Rename(filepath.Join(r.Dir(), name), filepath.Join(away, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if _, err := r.TaskState(); err == nil {
		t.Fatal("the run's tasks were read with its log moved away")
	}
	must(t, Heartbeat(r, "t1"))
	fi, err := os.Stat(beat)
	must(t, err)
	if !fi.ModTime().After(long.Add(time.Minute)) {
		t.Fatalf("%s still dates from %s after the heartbeat", beat, fi.ModTime())
	}
	if err := Heartbeat(r, "t2"); err == nil {
		t.Fatal("a heartbeat of a task without a file, the log gone, succeeded")
	}
	if err := Heartbeat(r, "../t1"); !errors.Is(err, crew.ErrInvalid) {
		t.Fatalf("Heartbeat of task ../t1 = %v, want invalid", err)
	}
}
