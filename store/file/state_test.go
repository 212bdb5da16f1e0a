package file_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store/file"
	"github.com/crew-dev/crew/task"
)

// newTestRun creates a state root in a temporary directory and a run "r1"
// in it.
func newTestRun(t *testing.T) *run.Run {
	t.Helper()
	dir := t.TempDir()
	root, err := run.Init(dir, crew.PrivatePerm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() }) // snapshots still being written, before TempDir goes
	r, err := root.Create(run.CreateOptions{ID: "r1", Title: "test", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fl returns r's log on the file store.
func fl(r *run.Run) *file.Log { return r.Log().(*file.Log) }

// tree returns the mail tree of r's state root.
func tree(r *run.Run) mailbox.Tree { return r.Root().Store.(*file.Store).MailTree() }

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sent is what a scenario sent, by name.
type sent map[string]*events.Message

// scenario drives a run through the public operations: tasks added,
// started, a question answered and one left open, steer, follow-up, nudge,
// an urgent report, a broadcast, reads, acknowledgements, a rejection, a
// cancel and a retry, a completion. after, if not nil, is called after each
// operation.
func scenario(t *testing.T, r *run.Run, after func(step int)) sent {
	t.Helper()
	ctx := context.Background()
	s := sent{}
	step := 0
	done := func() {
		step++
		if after != nil {
			after(step)
		}
	}
	send := func(name string, o run.SendOptions) {
		t.Helper()
		m, err := r.Send(ctx, o)
		must(t, err)
		s[name] = m
		done()
	}
	for _, id := range []string{"t1", "t2", "t3"} {
		agent := ""
		if id == "t3" {
			agent = "w3" // an agent named apart from its task
		}
		_, err := r.AddTask(ctx, id, state.TaskSpec{Title: "task " + id, Agent: agent}, "leader")
		must(t, err)
		done()
	}
	for _, id := range []string{"t1", "t2"} {
		_, err := r.Transition(ctx, id, task.Start, id, "", nil)
		must(t, err)
		done()
	}
	send("q1", run.SendOptions{Kind: events.KindQuestion, Task: "t1", From: "t1", Body: "Which database?"})
	send("steer", run.SendOptions{Kind: events.KindSteer, Task: "t2", From: "leader", Body: "Focus on the parser.", Priority: "high"})
	send("broadcast", run.SendOptions{Kind: events.KindMessage, Task: events.Broadcast, From: "leader", Body: "Standup in 5 <minutes> & counting"})
	send("report", run.SendOptions{Kind: events.KindReport, Task: "t2", From: "t2", Body: "Blocked on CI.", Priority: "urgent"})
	send("r1", run.SendOptions{Kind: events.KindResponse, Task: "t1", From: "leader", Body: "Use Postgres."})
	send("followup", run.SendOptions{Kind: events.KindFollowUp, Task: "t1", From: "leader", Body: "Then add tests.\nMany of them."})
	send("nudge", run.SendOptions{Kind: events.KindNudge, Task: "t3", From: "leader"})

	msgs, err := r.Inbox(ctx, "t1", run.InboxOptions{})
	must(t, err)
	if len(msgs) != 3 {
		t.Fatalf("t1's inbox holds %d messages, want response, broadcast, follow-up", len(msgs))
	}
	done()
	must(t, r.Acknowledge(ctx, "t1", []string{s["r1"].ID}, false, ""))
	done()
	_, err = r.Inbox(ctx, run.Leader, run.InboxOptions{})
	must(t, err)
	done()
	must(t, r.Acknowledge(ctx, run.Leader, []string{s["report"].ID}, false, ""))
	done()
	_, err = r.Inbox(ctx, "t2", run.InboxOptions{Peek: true}) // peeking marks nothing
	must(t, err)
	must(t, r.Acknowledge(ctx, "t2", []string{s["steer"].ID}, true, "already done"))
	done()
	for _, tr := range []struct {
		id string
		op task.Op
	}{{"t3", task.Cancel}, {"t3", task.Retry}, {"t2", task.Complete}} {
		_, err := r.Transition(ctx, tr.id, tr.op, "leader", "reason "+string(tr.op), nil)
		must(t, err)
		done()
	}
	send("q2", run.SendOptions{Kind: events.KindQuestion, Task: "t1", From: "t1", Body: "Which port?"})
	return s
}

// stateJSON is st as tasks.json holds it: the reducer's whole output.
func stateJSON(t *testing.T, st *state.State) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func snapshotPath(r *run.Run) string { return filepath.Join(r.Dir(), "tasks.json") }

// TestScenarioState checks the reducer's result for the scenario itself,
// so that the rebuild tests below compare against a right answer.
func TestScenarioState(t *testing.T) {
	r := newTestRun(t)
	s := scenario(t, r, nil)
	st, err := r.State()
	must(t, err)
	if st.Err() != nil {
		t.Fatalf("damage in a healthy log: %v", st.Err())
	}
	want := map[string]task.State{"t1": task.Waiting, "t2": task.Completed, "t3": task.Pending}
	for id, status := range want {
		if st.Tasks[id] == nil || st.Tasks[id].Status != status {
			t.Errorf("task %s: %+v, want %s", id, st.Tasks[id], status)
		}
	}
	if t1 := st.Tasks["t1"]; t1.Question != s["q2"].ID || t1.Questions != 2 || t1.Attempts != 1 {
		t.Errorf("t1 = %+v", t1)
	}
	if t3 := st.Tasks["t3"]; t3.Agent != "w3" || t3.EndedAt != nil || t3.Reason != "" {
		t.Errorf("t3 after cancel and retry = %+v", t3)
	}
	// Open: q2 (leader), the follow-up (t1, delivered), the nudge (t3), the
	// broadcast copies of t2 and t3. Closed: q1 (answered), the response and
	// the report (acknowledged), the steer (rejected), t1's broadcast copy is
	// still open (delivered, not acknowledged).
	open := map[string]string{}
	for key, o := range st.Open {
		open[key] = o.Status
	}
	wantOpen := map[string]string{
		s["q2"].ID:                events.StatusPending,
		s["followup"].ID:          events.StatusDelivered,
		s["nudge"].ID:             events.StatusPending,
		s["broadcast"].ID + "@t1": events.StatusDelivered,
		s["broadcast"].ID + "@t2": events.StatusPending,
		s["broadcast"].ID + "@t3": events.StatusPending,
	}
	if fmt.Sprint(open) != fmt.Sprint(wantOpen) {
		t.Errorf("open messages\n%v\nwant\n%v", open, wantOpen)
	}
	if st.Seq != s["q2"].Seq {
		t.Errorf("state seq %d, last event %d", st.Seq, s["q2"].Seq)
	}
}

// TestStateRebuiltFromLog: tasks.json is a projection. Deleted, corrupt,
// inconsistent with the log, or from any earlier point, the state read is
// the same as the log reduced from scratch; and the next write puts a
// correct tasks.json back.
func TestStateRebuiltFromLog(t *testing.T) {
	r := newTestRun(t)
	var snapshots [][]byte
	scenario(t, r, func(int) {
		r.Sync() // tasks.json follows each operation's return
		data, err := os.ReadFile(snapshotPath(r))
		must(t, err)
		snapshots = append(snapshots, data)
	})
	st, err := r.State()
	must(t, err)
	want := stateJSON(t, st)

	// From scratch: no snapshot at all.
	must(t, os.Remove(snapshotPath(r)))
	fresh, err := r.State()
	must(t, err)
	if got := stateJSON(t, fresh); got != want {
		t.Fatalf("state from the log alone\n%s\ndiffers from the state read with tasks.json\n%s", got, want)
	}

	writeRaw := func(data string) {
		t.Helper()
		must(t, os.WriteFile(snapshotPath(r), []byte(data), 0o600))
	}
	write := func(data string) { // sealed, as crew writes it: the checks after the seal's are tested
		t.Helper()
		writeRaw(string(file.SealJSON([]byte(strings.TrimSpace(data)))))
	}
	check := func(what string) {
		t.Helper()
		for _, rr := range []*run.Run{r, reopen(t, r)} {
			st, err := rr.State()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got := stateJSON(t, st); got != want {
				t.Errorf("%s: state\n%s\nwant\n%s", what, got, want)
			}
		}
	}
	// Every earlier snapshot plus the log after it gives the same state.
	for i, snap := range snapshots {
		writeRaw(string(snap))
		check(fmt.Sprintf("snapshot after step %d", i+1))
	}
	// Edited by hand (a task's status changed) without its seal redone.
	last := string(snapshots[len(snapshots)-1])
	edited := strings.Replace(last, `"status":"pending"`, `"status":"cancelled"`, 1)
	if edited == last {
		t.Fatalf("no pending task in the last snapshot to edit: %s", last)
	}
	writeRaw(edited)
	check("tasks.json edited by hand")
	writeRaw(want + "\n")
	check("tasks.json without its seal (an older crew's)")
	var old map[string]any
	must(t, json.Unmarshal([]byte(want), &old))
	delete(old, "files") // as written before State.Files existed
	b, _ := json.Marshal(old)
	write(string(b))
	check("tasks.json without files")
	writeRaw("{not json")
	check("corrupt tasks.json")
	writeRaw("")
	check("empty tasks.json")
	var bad state.State
	must(t, json.Unmarshal([]byte(want), &bad))
	bad.Offset = 10 // not a line end of the log
	b, _ = json.Marshal(&bad)
	write(string(b))
	check("tasks.json whose offset is not a line end")
	bad.Offset = int64(len(logFirstLine(t, r))) // a line end, but of another seq
	b, _ = json.Marshal(&bad)
	write(string(b))
	check("tasks.json whose seq does not match the log at its offset")
	bad.Offset = 1 << 40
	b, _ = json.Marshal(&bad)
	write(string(b))
	check("tasks.json beyond the end of the log")

	// The next write puts back a tasks.json that equals the fresh state.
	must(t, os.Remove(snapshotPath(r)))
	r2 := reopen(t, r)
	_, err = r2.Send(context.Background(), run.SendOptions{Kind: events.KindNudge, Task: "t3", From: "leader"})
	must(t, err)
	r2.Sync() // tasks.json follows the operation's return
	data, err := os.ReadFile(snapshotPath(r))
	if err != nil {
		t.Fatalf("the next write did not put tasks.json back: %v", err)
	}
	must(t, os.Remove(snapshotPath(r)))
	fresh, err = r2.State()
	must(t, err)
	if got := string(file.SealJSON([]byte(stateJSON(t, fresh)))); string(data) != got {
		t.Errorf("tasks.json written by the next write\n%s\nwant\n%s", data, got)
	}
}

// logFirstLine returns the first line of the run's log.
func logFirstLine(t *testing.T, r *run.Run) string {
	t.Helper()
	data, err := os.ReadFile(fl(r).EventsPath())
	must(t, err)
	for i, b := range data {
		if b == '\n' {
			return string(data[:i+1])
		}
	}
	t.Fatal("no line in the log")
	return ""
}

// reopen opens the run again, as another process would: no cached state.
func reopen(t *testing.T, r *run.Run) *run.Run {
	t.Helper()
	r2, err := r.Root().Open(r.ID())
	must(t, err)
	return r2
}
