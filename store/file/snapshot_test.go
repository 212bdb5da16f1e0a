package file_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store/file"
	"github.com/crew-dev/crew/task"
)

// fullStateJSON is st with its open messages, which tasks.json leaves out.
func fullStateJSON(t *testing.T, st *state.State) string {
	t.Helper()
	open, err := json.Marshal(st.Open)
	must(t, err)
	return stateJSON(t, st) + " open=" + string(open)
}

func openSnapshotPath(r *run.Run) string { return filepath.Join(r.Dir(), "open.jsonl") }

// busyRun drives a run past several open.jsonl snapshots: the scenario,
// then rounds of steers and reports, some read and acknowledged, some not.
func busyRun(t *testing.T, r *run.Run, after func()) {
	t.Helper()
	ctx := context.Background()
	scenario(t, r, func(int) {
		if after != nil {
			after()
		}
	})
	for i := range 150 {
		m, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: fmt.Sprintf("steer %d", i)})
		must(t, err)
		if i%3 == 0 {
			_, err := r.MarkDelivered(ctx, "t1", []string{m.ID})
			must(t, err)
		}
		if i%5 == 0 {
			must(t, r.Acknowledge(ctx, "t1", []string{m.ID}, false, ""))
		}
		if after != nil && i%10 == 0 {
			after()
		}
	}
}

// TestOpenSnapshotRebuiltFromLog: open.jsonl, like tasks.json, is a
// projection. Missing, from any earlier point, cut short, corrupt, or from
// another log, the state read with it is the state of the log alone, open
// messages included.
func TestOpenSnapshotRebuiltFromLog(t *testing.T) {
	r := newTestRun(t)
	var snaps []string
	busyRun(t, r, func() {
		if data, err := os.ReadFile(openSnapshotPath(r)); err == nil {
			snaps = append(snaps, string(data))
		}
	})
	if len(snaps) < 2 {
		t.Fatalf("%d open.jsonl snapshots written in a run of 300 events; want several", len(snaps))
	}
	full, err := r.State()
	must(t, err)
	want := fullStateJSON(t, full)
	if len(full.Open) == 0 {
		t.Fatal("the busy run has no open messages")
	}
	check := func(what string) {
		t.Helper()
		for _, rr := range []*run.Run{r, reopen(t, r)} {
			st, err := rr.State()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got := fullStateJSON(t, st); got != want {
				t.Errorf("%s: the state read differs from the log's (%d open messages, want %d)", what, len(st.Open), strings.Count(want, `"seq":`)-1)
			}
		}
		// The messages of one reader only (state.For, which skips the
		// other readers' lines undecoded): the same entries.
		for _, who := range []string{"t1", "t2", run.Leader} {
			one, err := reopen(t, r).Log().State(context.Background(), state.For(who))
			if err != nil {
				t.Fatalf("%s: state for %s: %v", what, who, err)
			}
			mine := map[string]*state.Open{}
			for key, o := range full.Open {
				if o.Task == state.RecipientKey(who) {
					mine[key] = o
				}
			}
			got, err := json.Marshal(one.Open)
			must(t, err)
			if want, _ := json.Marshal(mine); string(got) != string(want) {
				t.Errorf("%s: the state read for %s holds\n%s\nwant\n%s", what, who, got, want)
			}
		}
	}
	write := func(data string) {
		t.Helper()
		must(t, os.WriteFile(openSnapshotPath(r), []byte(data), 0o600))
	}
	for i, s := range snaps {
		write(s)
		check(fmt.Sprintf("open.jsonl number %d", i+1))
	}
	last := snaps[len(snaps)-1]
	lines := strings.SplitAfter(last, "\n")
	write(strings.Join(lines[:len(lines)-2], "")) // its last open message lost
	check("open.jsonl cut short")
	write(strings.Replace(last, `"key"`, `"kee"`, 1))
	check("open.jsonl with a bad line")
	write(strings.Replace(last, `"task":"t1"`, `"task":t1"`, 1))
	check("open.jsonl with a line that is no JSON")
	write("{not json\n")
	check("corrupt open.jsonl")
	var h struct{ Offset int64 }
	must(t, json.Unmarshal([]byte(lines[0]), &h))
	write(strings.Replace(last, fmt.Sprintf(`"offset":%d`, h.Offset), `"offset":10`, 2))
	check("open.jsonl whose offset is not a line end")
	must(t, os.Remove(openSnapshotPath(r)))
	check("no open.jsonl")
}

// TestTaskStateLeavesOutOpenMessages: TaskState reads the tasks alone,
// the same as State's.
func TestTaskStateLeavesOutOpenMessages(t *testing.T) {
	r := newTestRun(t)
	busyRun(t, r, nil)
	full, err := r.State()
	must(t, err)
	tasks, err := reopen(t, r).TaskState()
	must(t, err)
	if tasks.Open != nil {
		t.Errorf("TaskState read %d open messages", len(tasks.Open))
	}
	if got, want := stateJSON(t, tasks), stateJSON(t, full); got != want {
		t.Errorf("TaskState\n%s\nState\n%s", got, want)
	}
	data, err := os.ReadFile(snapshotPath(r))
	must(t, err)
	if strings.Contains(string(data), `"open"`) {
		t.Errorf("tasks.json holds the open messages: %s", data)
	}
}

// TestAsyncProjection: an asynchronous Run returns once each event is
// durable; after Sync every projection equals what the log says, each
// mail-tree copy is there once, and a copy seen before it was projected is
// delivered read. Many operations in a row cross open.jsonl snapshots
// while projections are behind (events must not be projected twice).
func TestAsyncProjection(t *testing.T) {
	r := newTestRun(t)
	r.SetAsync(true)
	ctx := context.Background()
	for _, id := range []string{"t1", "t2"} {
		_, err := r.AddTask(ctx, id, state.TaskSpec{}, "leader")
		must(t, err)
		_, err = r.Transition(ctx, id, task.Start, id, "", nil)
		must(t, err)
	}
	var ids []string
	for i := range 400 {
		m, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: []string{"t1", "t2"}[i%2], From: "leader", Body: fmt.Sprintf("steer %d", i)})
		must(t, err)
		ids = append(ids, m.ID)
		if i%4 == 0 {
			_, err := r.MarkDelivered(ctx, m.Task, []string{m.ID})
			must(t, err)
		}
	}
	r.Sync()
	checkMailboxes(t, r, "after asynchronous sends")
	flags := treeFlags(t, r)
	if len(flags) != len(ids) {
		t.Errorf("%d mail-tree copies for %d messages", len(flags), len(ids))
	}
	for i, id := range ids {
		if got, want := readFlag(t, r, []string{"t1", "t2"}[i%2], id), i%4 == 0; got != want {
			t.Errorf("copy of steer %d: read %v, want %v", i, got, want)
		}
	}
	snap := fl(r).ReadSnapshot()
	st, err := reopen(t, r).State()
	must(t, err)
	if snap.Seq != st.Seq {
		t.Errorf("tasks.json at seq %d after Sync, the log at %d", snap.Seq, st.Seq)
	}
	// The projections are exactly what a rebuild from the log gives.
	before := treeFlags(t, r)
	must(t, os.RemoveAll(tree(r).Dir("t1")))
	must(t, os.RemoveAll(tree(r).Dir("t2")))
	_, err = reopen(t, r).Repair(ctx)
	must(t, err)
	if after := treeFlags(t, r); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("mail tree rebuilt from the log differs:\n%v\nwas\n%v", after, before)
	}
}

// TestEachInbox: the streaming read shows what Inbox shows, oldest first,
// marks the pending ones delivered in one event, and lets an error from
// its callback stop it.
func TestEachInbox(t *testing.T) {
	r := newTestRun(t)
	busyRun(t, r, nil)
	peek, err := reopen(t, r).Inbox(context.Background(), "t1", run.InboxOptions{Peek: true})
	must(t, err)
	pending := 0
	for _, m := range peek {
		if m.Status == events.StatusPending {
			pending++
		}
	}
	if pending == 0 {
		t.Fatal("nothing pending for t1")
	}
	before, err := r.State()
	must(t, err)
	var got []events.Message
	must(t, reopen(t, r).EachInbox(context.Background(), "t1", run.InboxOptions{}, func(m *events.Message) error {
		got = append(got, *m)
		return nil
	}))
	if len(got) != len(peek) {
		t.Fatalf("EachInbox gave %d messages, Inbox %d", len(got), len(peek))
	}
	for i := range got {
		if got[i].ID != peek[i].ID || got[i].Body != peek[i].Body || got[i].Status != events.StatusDelivered || got[i].DeliveredAt == nil {
			t.Fatalf("message %d: %+v, want %s delivered", i, got[i], peek[i].ID)
		}
		if i > 0 && got[i].Seq <= got[i-1].Seq {
			t.Fatalf("messages out of order: seq %d after %d", got[i].Seq, got[i-1].Seq)
		}
	}
	evs := logEvents(t, r)
	if last := evs[len(evs)-1]; last.Type != events.MessageDelivered || last.Seq != before.Seq+1 || len(last.MessageIDs) != pending {
		t.Errorf("last event %s at seq %d naming %d messages; want one message.delivered at %d naming %d", last.Type, last.Seq, len(last.MessageIDs), before.Seq+1, pending)
	}
	for _, id := range last(evs).MessageIDs {
		if !readFlag(t, r, "t1", id) {
			t.Errorf("the copy of %s is not marked read", id)
		}
	}
	stop := fmt.Errorf("enough")
	n := 0
	err = r.EachInbox(context.Background(), "t1", run.InboxOptions{}, func(*events.Message) error {
		n++
		return stop
	})
	if err != stop || n != 1 {
		t.Errorf("a callback error: EachInbox returned %v after %d calls; want it back after 1", err, n)
	}
}

func last(evs []events.Event) events.Event { return evs[len(evs)-1] }

// TestOpenSnapshotWrittenWhenDue: the commit that finds open.jsonl due
// writes it, even while the open messages pile up (a regression: the rule
// that loads them and the rule that writes them used different counts, so
// every commit in between loaded every open message and wrote nothing).
func TestOpenSnapshotWrittenWhenDue(t *testing.T) {
	r := newTestRun(t)
	ctx := context.Background()
	_, err := r.AddTask(ctx, "t1", state.TaskSpec{}, "leader")
	must(t, err)
	var seq int64
	for seq < 130 { // no open.jsonl yet: due from seq 128 on
		m, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: "steer"})
		must(t, err)
		seq = m.Seq
	}
	r = reopen(t, r)
	since, count := fl(r).OpenSnapshotState()
	if since < 128 || count < 120 {
		t.Fatalf("open.jsonl after %d events, over 120 of them open messages: seq %d, %d open; want it written at seq 128 or later", seq, since, count)
	}
}

// TestSnapshotEvery128AndAtClose: tasks.json falls at most
// file.SnapshotEvery events behind what a process has projected, whether
// it keeps the run lock through a burst or lets it go between, and it is
// current once the process closes its root (Store.Close).
func TestSnapshotEvery128AndAtClose(t *testing.T) {
	r := newTestRun(t)
	ctx := context.Background()
	_, err := r.AddTask(ctx, "t1", state.TaskSpec{}, "leader")
	must(t, err)
	st, err := r.TaskState()
	must(t, err)
	must(t, fl(r).Hold(ctx))
	for seq := st.Seq + 1; seq <= st.Seq+300; seq++ {
		next := st.CopyTasks()
		next.Seq = seq // as a projection job leaves it (its offset matters only to readers)
		must(t, fl(r).Checkpoint(next))
		if snap := snapshotSeq(t, r); seq-snap >= file.SnapshotEvery {
			t.Fatalf("after the job of seq %d, tasks.json is at seq %d: over %d behind", seq, snap, file.SnapshotEvery)
		}
		if seq%100 == 0 { // the lock let go and taken again
			fl(r).Unhold()
			must(t, fl(r).Hold(ctx))
		}
	}
	fl(r).Unhold()
	if snap := snapshotSeq(t, r); st.Seq+300-snap >= file.SnapshotEvery {
		t.Fatalf("after the lock is let go, tasks.json is at seq %d: over %d behind %d", snap, file.SnapshotEvery, st.Seq+300)
	}
	must(t, r.Root().Close())
	if snap := snapshotSeq(t, r); snap != st.Seq+300 {
		t.Fatalf("after Close, tasks.json is at seq %d, want %d", snap, st.Seq+300)
	}
}

// TestSnapshotKeptAcrossLockEpochs: a long-lived process (crew serve)
// that commits once per lock epoch, another process taking the run lock
// between its commits, does not rewrite tasks.json each time it lets
// the lock go (only every file.SnapshotEvery events, or once idle,
// which this test puts off; its seq is known from its first load, under
// the lock), yet another process reads every commit, and writes after
// them with the mailbox files and mail tree right; when that process
// rewrites tasks.json (on its way out: it is due, the run has one task),
// the first starts from its file again; Close leaves tasks.json current.
func TestSnapshotKeptAcrossLockEpochs(t *testing.T) {
	file.SetSnapshotIdle(t, time.Hour)
	keeping, other := keptRoots(t)
	ctx := context.Background()
	k, err := keeping.Open("r1")
	must(t, err)
	send, takeLock := epochSteer(t, k)
	steer := func(r *run.Run, i int) *events.Message {
		t.Helper()
		return send(r, fmt.Sprint("steer ", i))
	}
	takeLock() // the task's commit is done, its snapshot written
	before := snapshotSeq(t, k)
	first := steer(k, 0)
	if snap := snapshotSeq(t, k); snap != before || before != first.Seq-1 {
		t.Fatalf("after the first commit of a process, tasks.json is at seq %d, want it left at %d, the seq it was read at", snap, first.Seq-1)
	}
	var last *events.Message
	for i := 1; i < 100; i++ {
		last = steer(k, i)
		if snap := snapshotSeq(t, k); snap != before {
			t.Fatalf("after steer %d, each in a lock epoch of its own, tasks.json was rewritten (at seq %d); want it left at seq %d until %d events behind", i, snap, before, file.SnapshotEvery)
		}
	}
	o, err := other.Open("r1")
	must(t, err)
	inbox, err := o.Inbox(ctx, "t1", run.InboxOptions{})
	must(t, err)
	if len(inbox) != 100 || inbox[99].ID != last.ID {
		t.Fatalf("another process reads %d messages in t1's inbox, want the 100 steers", len(inbox))
	}
	must(t, other.Close())    // the process that read them ends
	o, err = other.Open("r1") // a process of one commit, as crew steer
	must(t, err)
	theirs := steer(o, 100) // replays the kept Log's events after tasks.json
	must(t, other.Close())  // and writes it, due, on its way out
	checkMailboxes(t, o, "after another process's commit")
	if snap := snapshotSeq(t, o); snap != theirs.Seq {
		t.Fatalf("after another process's commit, tasks.json is at seq %d, want %d", snap, theirs.Seq)
	}
	// The kept Log sees tasks.json changed and learns its seq: its next
	// commit leaves it, as a first commit does, to be written when due.
	ours := steer(k, 101)
	if snap := snapshotSeq(t, k); snap != theirs.Seq {
		t.Fatalf("after tasks.json was rewritten by another process, the kept Log's commit left it at seq %d, want %d (%d is not due yet)", snap, theirs.Seq, ours.Seq)
	}
	for i := 102; i < 110; i++ {
		last = steer(k, i)
	}
	for i, m := range inbox { // read by crew inbox
		if !readFlag(t, o, "t1", m.ID) {
			t.Errorf("steer %d was read, its mail copy is not marked read", i)
		}
	}
	for i, m := range []*events.Message{theirs, ours, last} {
		if readFlag(t, o, "t1", m.ID) {
			t.Errorf("steer %d of the end was not read, its mail copy is marked read", i)
		}
	}
	if n := len(treeFlags(t, o)); n != 110 {
		t.Errorf("the mail tree holds %d copies, want 110", n)
	}
	must(t, keeping.Close())
	if snap := snapshotSeq(t, k); snap != last.Seq {
		t.Fatalf("after Close, tasks.json is at seq %d, want %d", snap, last.Seq)
	}
	checkMailboxes(t, o, "at the end")
}

// TestSnapshotOwedAfterAnEarlierOne: a process whose commit is later
// than another's, and which lets the run lock go before that other
// process writes tasks.json at its own (earlier) state, still writes
// its state when it closes: tasks.json and the projection mark end at
// the log's end. (It forgot its pending state when it found tasks.json
// rewritten, and left its commit in neither: TestMCPEndsWithCallsInFlight
// found it, crew steer processes beside crew mcp.)
func TestSnapshotOwedAfterAnEarlierOne(t *testing.T) {
	file.SetSnapshotIdle(t, time.Hour)
	keeping, other := keptRoots(t)
	k, err := keeping.Open("r1")
	must(t, err)
	o, err := other.Open("r1")
	must(t, err)
	steer, _ := epochSteer(t, k) // each Log lets the lock go, tasks.json still owed
	theirs := steer(o, "earlier")
	ours := steer(k, "later")
	if theirs.Seq >= ours.Seq {
		t.Fatalf("seqs %d and %d: want the other process's first", theirs.Seq, ours.Seq)
	}
	must(t, other.Close()) // writes tasks.json at its state, earlier than ours
	if snap := snapshotSeq(t, o); snap != theirs.Seq {
		t.Fatalf("the other process wrote tasks.json at seq %d, want %d", snap, theirs.Seq)
	}
	must(t, keeping.Close())
	if snap, mark := snapshotSeq(t, k), markSeq(t, k); snap != ours.Seq || mark != ours.Seq {
		t.Fatalf("after the later process closed, tasks.json is at seq %d and the projection mark at %d, want both at %d", snap, mark, ours.Seq)
	}
}

// epochSteer returns send, which steers task t1 of a run open in a Log
// of its own and returns once that Log has let the run lock go (it takes
// and lets go the lock of k's run, as another process does between two
// commits), and takeLock, which does the second part alone.
func epochSteer(t *testing.T, k *run.Run) (send func(r *run.Run, body string) *events.Message, takeLock func()) {
	lock := flock.New(filepath.Join(k.Dir(), "run.lock"))
	takeLock = func() {
		t.Helper()
		must(t, lock.Lock())
		must(t, lock.Unlock())
	}
	send = func(r *run.Run, body string) *events.Message {
		t.Helper()
		m, err := r.Send(context.Background(), run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: body})
		must(t, err)
		takeLock()
		return m
	}
	return send, takeLock
}

// markSeq returns the seq the run's projection mark (projected.json) holds.
func markSeq(t *testing.T, r *run.Run) int64 {
	t.Helper()
	var m struct{ Seq int64 }
	data, err := os.ReadFile(filepath.Join(r.Dir(), "projected.json"))
	must(t, err)
	must(t, json.Unmarshal(data, &m))
	return m.Seq
}

// snapshotSeq returns the seq tasks.json holds, sealed or not.
func snapshotSeq(t *testing.T, r *run.Run) int64 {
	t.Helper()
	data, err := os.ReadFile(snapshotPath(r))
	must(t, err)
	var st struct{ Seq int64 }
	must(t, json.Unmarshal(data, &st))
	return st.Seq
}

// TestCloseWaitsForSnapshots: a synchronous operation returns before its
// snapshot is written; Root.Close (Store.Close) waits for it, so that a
// process that closes its root before it ends leaves tasks.json current.
func TestCloseWaitsForSnapshots(t *testing.T) {
	r := newTestRun(t)
	ctx := context.Background()
	if _, err := r.AddTask(ctx, "t1", state.TaskSpec{}, "leader"); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		m, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: fmt.Sprint("steer ", i)})
		must(t, err)
		must(t, r.Root().Close())
		if snap := fl(r).ReadSnapshot(); snap.Seq != m.Seq {
			t.Fatalf("after steer %d and Close, tasks.json is at seq %d, want %d", i, snap.Seq, m.Seq)
		}
	}
}

// TestCloseDuringOperations: Root.Close may be called while goroutines
// still operate (a sync.WaitGroup would panic, "reused before previous
// Wait has returned"); once they stop, Close leaves tasks.json current.
func TestCloseDuringOperations(t *testing.T) {
	r := newTestRun(t)
	ctx := context.Background()
	if _, err := r.AddTask(ctx, "t1", state.TaskSpec{}, "leader"); err != nil {
		t.Fatal(err)
	}
	var last atomic.Int64
	var running atomic.Int32
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		running.Add(1)
		go func() {
			defer wg.Done()
			defer running.Add(-1)
			for i := range 50 {
				m, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: fmt.Sprint("steer ", g, i)})
				if err != nil {
					t.Error(err)
					return
				}
				for s := last.Load(); s < m.Seq && !last.CompareAndSwap(s, m.Seq); s = last.Load() {
				}
			}
		}()
	}
	for running.Load() > 0 {
		if err := r.Root().Close(); err != nil {
			t.Error(err)
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	must(t, r.Root().Close())
	if snap := fl(r).ReadSnapshot(); snap.Seq != last.Load() {
		t.Fatalf("after the operations and Close, tasks.json is at seq %d, want %d", snap.Seq, last.Load())
	}
}

// TestSnapshotWrittenOnceIdle: a long-lived process that let the run
// lock go owing tasks.json a state writes it, taking the lock again,
// once it has committed nothing for a while, without Close.
func TestSnapshotWrittenOnceIdle(t *testing.T) {
	keeping, _ := keptRoots(t)
	ctx := context.Background()
	k, err := keeping.Open("r1")
	must(t, err)
	var last *events.Message
	for i := range 20 {
		last, err = k.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: fmt.Sprint("steer ", i)})
		must(t, err)
	}
	for deadline := time.Now().Add(20 * time.Second); snapshotSeq(t, k) != last.Seq; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("20 s after the last commit, tasks.json is at seq %d, want %d", snapshotSeq(t, k), last.Seq)
		}
	}
}

// TestProjectionMark: a one-shot process (a crew command: open, commit,
// close) on a run of 100 tasks leaves tasks.json behind until it is due
// (file.TasksDue: 4 events behind), and says in projected.json how far
// its projections got; the next writer starts from tasks.json and
// projects again only the events after the mark. A mark that does not
// match the log, or is not whole, says nothing (the events after
// tasks.json are projected again), and crew repair removes it.
func TestProjectionMark(t *testing.T) {
	r := newTestRun(t)
	ctx := context.Background()
	for i := range 100 {
		_, err := r.AddTask(ctx, fmt.Sprintf("t%d", i), state.TaskSpec{}, "leader")
		must(t, err)
	}
	must(t, r.Root().Close())
	markPath := filepath.Join(r.Dir(), "projected.json")
	var sent []*events.Message
	command := func() { // crew steer t1 ..., as a process of its own
		t.Helper()
		root, err := run.Find(r.Root().Dir(), crew.PrivatePerm)
		must(t, err)
		c, err := root.Open(r.ID())
		must(t, err)
		m, err := c.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: fmt.Sprint("steer ", len(sent))})
		must(t, err)
		must(t, root.Close())
		sent = append(sent, m)
	}
	removeCopy := func(m *events.Message) {
		t.Helper()
		c, err := tree(r).Find("t1", m.ID)
		must(t, err)
		must(t, os.Remove(c.Path))
	}
	delivered := func(m *events.Message) bool {
		_, err := tree(r).Find("t1", m.ID)
		return err == nil
	}

	for i := 0; len(sent) == 0 || snapshotSeq(t, r) != sent[len(sent)-1].Seq; i++ {
		if i == 4 {
			t.Fatalf("after 4 commands, tasks.json is at seq %d, want it written at %d, 4 behind", snapshotSeq(t, r), sent[3].Seq)
		}
		command() // until tasks.json is due
	}
	base, sent := snapshotSeq(t, r), sent[:0]
	command()
	command()
	if snap, mark := snapshotSeq(t, r), markSeq(t, r); snap != base || mark != sent[1].Seq {
		t.Fatalf("2 events behind on 100 tasks: tasks.json at seq %d, want %d; projected.json at %d, want %d", snap, base, mark, sent[1].Seq)
	}
	// The next writer follows the mark: a copy removed by hand behind it
	// is not delivered again (crew repair would).
	removeCopy(sent[0])
	command()
	if delivered(sent[0]) {
		t.Fatal("a writer projected again an event the mark says was projected")
	}
	checkMailboxes(t, r, "after the mark was followed")
	// A mark sealed whole but of another log (its seq is not the seq of
	// the line ending at its offset) says nothing.
	mark, err := os.ReadFile(markPath)
	must(t, err)
	var m map[string]any
	must(t, json.Unmarshal(mark, &m))
	delete(m, "crc32")
	m["seq"] = m["seq"].(float64) + 1
	obj, err := json.Marshal(m)
	must(t, err)
	must(t, os.WriteFile(markPath, fmt.Appendf(obj[:len(obj)-1], `,"crc32":"%08x"}`+"\n", crc32.ChecksumIEEE(obj)), 0o600))
	command() // 4 behind: tasks.json due
	if !delivered(sent[0]) {
		t.Fatal("with a mark of another log, a writer did not project again the events after tasks.json")
	}
	if snap := snapshotSeq(t, r); snap != sent[3].Seq {
		t.Fatalf("4 events behind on 100 tasks, tasks.json is at seq %d, want it written at %d", snap, sent[3].Seq)
	}
	// A torn mark says nothing either.
	command()
	removeCopy(sent[4])
	must(t, os.Truncate(markPath, 20))
	command()
	if !delivered(sent[4]) {
		t.Fatal("with a torn mark, a writer did not project again the events after tasks.json")
	}
	checkMailboxes(t, r, "after a torn mark")
	// crew repair removes the mark before it rebuilds the projections.
	rr, err := r.Root().Open(r.ID())
	must(t, err)
	_, err = rr.Repair(ctx)
	must(t, err)
	if _, err := os.Lstat(markPath); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after crew repair, projected.json: %v, want it removed", err)
	}
}
