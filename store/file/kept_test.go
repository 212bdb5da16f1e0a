package file_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store/file"
)

// keptRoots returns two state roots on one directory holding run r1 with
// task t1: one whose store keeps its Logs (a long-lived process: crew
// serve), and another (another process, each Open a new Log).
func keptRoots(t *testing.T) (keeping, other *run.Root) {
	t.Helper()
	dir := t.TempDir()
	other, err := run.Init(dir, crew.PrivatePerm)
	must(t, err)
	t.Cleanup(func() { other.Close() })
	keeping, err = run.Find(dir, crew.PrivatePerm)
	must(t, err)
	keeping.Store.(*file.Store).KeepLogs = true
	t.Cleanup(func() { keeping.Close() })
	r, err := other.Create(run.CreateOptions{ID: "r1", Title: "kept", Dir: dir})
	must(t, err)
	_, err = r.AddTask(context.Background(), "t1", state.TaskSpec{Title: "aaaa"}, run.Leader)
	must(t, err)
	return keeping, other
}

// stateKinds are the kinds of state a Log keeps apart.
var stateKinds = map[string]func() *state.State{
	"tasks": state.NewTasks,
	"whole": state.New,
	"t1":    func() *state.State { return state.For("t1") },
}

// stateText is what a state holds, for comparing two.
func stateText(t *testing.T, st *state.State) string {
	t.Helper()
	a, err := json.Marshal(st)
	must(t, err)
	b, err := json.Marshal(st.Open)
	must(t, err)
	return string(a) + "\n" + string(b)
}

// sameAsFresh checks that the kept Log's State of each kind (twice: the
// second call is one it keeps for) is what a new Log reads.
func sameAsFresh(t *testing.T, keeping, other *run.Root, when string) {
	t.Helper()
	ctx := context.Background()
	k, err := keeping.Open("r1")
	must(t, err)
	o, err := other.Open("r1")
	must(t, err)
	for name, empty := range stateKinds {
		want, err := o.Log().State(ctx, empty())
		must(t, err)
		for range 2 {
			got, err := k.Log().State(ctx, empty())
			must(t, err)
			if g, w := stateText(t, got), stateText(t, want); g != w {
				t.Fatalf("%s: the kept Log's %s state is\n%s\nwhere a new Log reads\n%s", when, name, g, w)
			}
		}
	}
}

// TestKeptStateIsUsed: a Log kept by a long-lived process (Store.KeepLogs)
// reads the run's state from a snapshot at most twice per kind, then
// starts from the state it kept: a tasks.json rewritten afterwards, sealed
// and matching the log but saying otherwise, is not read again; a new
// Log, as another process's, reads it. Each state returned is the
// caller's to change.
func TestKeptStateIsUsed(t *testing.T) {
	keeping, other := keptRoots(t)
	ctx := context.Background()
	sameAsFresh(t, keeping, other, "at first")
	k, err := keeping.Open("r1")
	must(t, err)

	// The caller changes what it got: the next state is whole.
	got, err := k.Log().State(ctx, state.New())
	must(t, err)
	got.Tasks["t1"].Title = "changed by the caller"
	delete(got.Tasks, "t1")
	sameAsFresh(t, keeping, other, "after a caller changed its state")

	// A tasks.json that lies (sealed, matching the log's seq and offset).
	must(t, other.Close()) // its snapshots written
	path := filepath.Join(k.Log().Dir(), "tasks.json")
	snap := fl(k).ReadSnapshot()
	if snap.Seq == 0 {
		t.Fatal("no tasks.json to start from")
	}
	snap.Tasks["t1"].Title = "from the snapshot"
	data, err := json.Marshal(snap)
	must(t, err)
	must(t, os.WriteFile(path, file.SealJSON(data), 0o600))
	o, err := other.Open("r1")
	must(t, err)
	if st, err := o.Log().State(ctx, state.NewTasks()); err != nil || st.Tasks["t1"].Title != "from the snapshot" {
		t.Fatalf("a new Log did not read the rewritten tasks.json: %v", err)
	}
	st, err := k.Log().State(ctx, state.NewTasks())
	must(t, err)
	if st.Tasks["t1"].Title != "aaaa" {
		t.Fatalf("the kept Log read tasks.json again: task t1 is titled %q", st.Tasks["t1"].Title)
	}
}

// TestKeptStateFollowsLog: a kept Log's State stays what a new Log reads
// while other processes append (steers, acknowledgements), when the log
// is replaced by a file of the same length whose line at the kept offset
// holds the same seq (as crew repair renames a new log into place), cut
// short in place and grown again past the kept offset, damaged (every
// State says so) and repaired.
func TestKeptStateFollowsLog(t *testing.T) {
	keeping, other := keptRoots(t)
	ctx := context.Background()
	sameAsFresh(t, keeping, other, "at first")
	o, err := other.Open("r1")
	must(t, err)
	events1 := o.Log().(*file.Log).EventsPath()

	// Another process appends.
	m, err := o.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: "steer one"})
	must(t, err)
	sameAsFresh(t, keeping, other, "after another process's steer")
	must(t, o.Acknowledge(ctx, "t1", []string{m.ID}, false, ""))
	_, err = o.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: "steer two"})
	must(t, err)
	sameAsFresh(t, keeping, other, "after another process's acknowledgement and steer")
	must(t, other.Close()) // its snapshots written

	// The log replaced by another file of the same length and seqs, the
	// task's title changed; the snapshots, which say otherwise, removed.
	data, err := os.ReadFile(events1)
	must(t, err)
	if bytes.Count(data, []byte(`"aaaa"`)) != 1 {
		t.Fatalf("the log holds the title %d times", bytes.Count(data, []byte(`"aaaa"`)))
	}
	replaced := bytes.Replace(data, []byte(`"aaaa"`), []byte(`"bbbb"`), 1)
	must(t, os.WriteFile(events1+".new", replaced, 0o600))
	must(t, os.Rename(events1+".new", events1))
	dir := filepath.Dir(events1)
	for _, name := range []string{"tasks.json", ".tasks.json.spare", "open.jsonl"} {
		os.Remove(filepath.Join(dir, name))
	}
	sameAsFresh(t, keeping, other, "after the log was replaced")
	if st, err := o.Log().State(ctx, state.NewTasks()); err != nil || st.Tasks["t1"].Title != "bbbb" {
		t.Fatalf("the replaced log does not retitle the task: %v", err)
	}

	// Cut in place after the task's line (the same file, shorter), then
	// grown again past where it ended.
	cut := bytes.Index(data, []byte(`"aaaa"`))
	cut += bytes.IndexByte(data[cut:], '\n') + 1
	must(t, os.Truncate(events1, int64(cut)))
	sameAsFresh(t, keeping, other, "after the log was cut short")
	for i := 0; ; i++ {
		if fi, err := os.Stat(events1); err == nil && fi.Size() > int64(len(data)) {
			break
		}
		_, err := o.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: "steer again"})
		must(t, err)
	}
	sameAsFresh(t, keeping, other, "after the cut log grew past where it ended")

	// Damage appended by hand: every State says so; a repair mends it.
	f, err := os.OpenFile(events1, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString("not an event\n")
	f.Close()
	must(t, err)
	k, err := keeping.Open("r1")
	must(t, err)
	for range 3 {
		st, err := k.Log().State(ctx, state.For("t1"))
		must(t, err)
		if st.Err() == nil {
			t.Fatal("the kept Log's state does not say the log is damaged")
		}
	}
	rr, err := other.OpenForRepair("r1")
	must(t, err)
	_, err = other.Store.(*file.Store).Repair(ctx, rr.Log())
	must(t, err)
	sameAsFresh(t, keeping, other, "after a repair")
}

// TestKeptStateCutRegrownSameLength: a log cut back by one event and
// regrown by crew's own writer to the same length ends the same seq's
// line at the same offset, with another event (a steer of another body of
// the same length). The kept Log (crew serve) must see that the line it
// was read up to is not the same bytes, and read the state again: it
// used to show the steer no longer in the log, at every hook, and never
// the one that is (found by the breaker with crew serve's HTTP hooks).
func TestKeptStateCutRegrownSameLength(t *testing.T) {
	keeping, other := keptRoots(t)
	ctx := context.Background()
	o, err := other.Open("r1")
	must(t, err)
	_, err = o.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: "X1"})
	must(t, err)
	must(t, other.Close())
	sameAsFresh(t, keeping, other, "after the steer X1") // the kept Log keeps X1's state

	path := o.Log().(*file.Log).EventsPath()
	data, err := os.ReadFile(path)
	must(t, err)
	last := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
	must(t, os.Truncate(path, int64(last))) // X1's line cut off by hand (a backup put back in place)
	o, err = other.Open("r1")
	must(t, err)
	_, err = o.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: "X2"})
	must(t, err)
	must(t, other.Close())
	if fi, err := os.Stat(path); err != nil || fi.Size() != int64(len(data)) {
		t.Fatalf("the regrown log is not as long as before: %v", err)
	}
	sameAsFresh(t, keeping, other, "after the log was cut back and crew appended X2 of the same length")
}
