package file_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/uuid"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// logEvents reads the whole log, failing on any damage.
func logEvents(t *testing.T, r *run.Run) []events.Event {
	t.Helper()
	c, err := events.Read(fl(r).EventsPath(), 0)
	must(t, err)
	defer c.Close()
	var evs []events.Event
	for {
		e, err := c.Next()
		if err == io.EOF {
			return evs
		}
		must(t, err)
		evs = append(evs, e)
	}
}

// wantMailboxes is what each mailbox file must hold: the messages of the
// log, by file, in seq order, each line as the log's event embeds it.
func wantMailboxes(t *testing.T, r *run.Run) map[string]string {
	t.Helper()
	want := map[string]string{}
	for _, e := range logEvents(t, r) {
		if e.Message != nil {
			line, err := events.Marshal(e.Message)
			must(t, err)
			want[mailbox.FileFor(e.Message)] += string(line)
		}
	}
	return want
}

// checkMailboxes asserts that every mailbox file equals its rebuild from
// the log, byte for byte.
func checkMailboxes(t *testing.T, r *run.Run, what string) {
	t.Helper()
	want := wantMailboxes(t, r)
	for _, file := range mailbox.Files {
		data, err := os.ReadFile(fl(r).MailboxPath(file))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if string(data) != want[file] {
			t.Errorf("%s: %s holds\n%s\nthe log says it must hold\n%s", what, file, data, want[file])
		}
	}
}

// treeFlags lists every mail-tree file of every agent with its read flag.
func treeFlags(t *testing.T, r *run.Run) map[string]bool {
	t.Helper()
	tree := tree(r)
	agents, err := tree.Agents()
	must(t, err)
	flags := map[string]bool{}
	for _, a := range agents {
		entries, errs, err := tree.List(a, true)
		must(t, err)
		if len(errs) > 0 {
			t.Fatalf("mail tree of %s: %v", a, errs)
		}
		for _, e := range entries {
			flags[a+"/"+e.Name] = e.Mail.Read
		}
	}
	return flags
}

// readFlag returns the read flag of message id in agent's tree.
func readFlag(t *testing.T, r *run.Run, agent, id string) bool {
	t.Helper()
	e, err := tree(r).Find(agent, id)
	if err != nil {
		t.Fatalf("no copy of %s for %s: %v", id, agent, err)
	}
	return e.Mail.Read
}

func TestMailboxesMatchLog(t *testing.T) {
	r := newTestRun(t)
	scenario(t, r, func(step int) { checkMailboxes(t, r, fmt.Sprintf("after step %d", step)) })
}

// TestLostMailboxRebuilt: a mailbox file deleted (or lost in a crash) is
// rebuilt, identical to a fresh rebuild from the log, by the next write.
func TestLostMailboxRebuilt(t *testing.T) {
	ops := map[string]run.SendOptions{
		mailbox.InboxFile:    {Kind: events.KindFollowUp, Task: "t1", From: "leader", Body: "more"},
		mailbox.OutboxFile:   {Kind: events.KindReport, Task: "t1", From: "t1", Body: "status"},
		mailbox.SteeringFile: {Kind: events.KindSteer, Task: "t3", From: "leader", Body: "turn"},
	}
	for _, lost := range mailbox.Files {
		for _, via := range mailbox.Files {
			t.Run(fmt.Sprintf("lose %s, write %s", lost, via), func(t *testing.T) {
				r := newTestRun(t)
				scenario(t, r, nil)
				must(t, os.Remove(fl(r).MailboxPath(lost)))
				_, err := reopen(t, r).Send(context.Background(), ops[via])
				must(t, err)
				checkMailboxes(t, r, "after the next write")
			})
		}
	}
}

// TestDamagedMailboxRebuilt: a mailbox file whose last line is damaged is
// rebuilt by the next write; one damaged in the middle still reads right
// (the log is the fallback) and is rebuilt by Repair.
func TestDamagedMailboxRebuilt(t *testing.T) {
	r := newTestRun(t)
	s := scenario(t, r, nil)
	path := fl(r).MailboxPath(mailbox.InboxFile)
	data, err := os.ReadFile(path)
	must(t, err)
	lines := strings.SplitAfter(string(data), "\n")
	lines = lines[:len(lines)-1] // the empty string after the last '\n'
	lines[len(lines)-1] = `{"id":"` + strings.Repeat("#", 40) + "\n"
	must(t, os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600))
	_, err = r.Send(context.Background(), run.SendOptions{Kind: events.KindFollowUp, Task: "t1", From: "leader", Body: "more"})
	must(t, err)
	checkMailboxes(t, r, "after a write to a mailbox ending in damage")

	// Damage in the middle: readers still see the right bodies.
	data, err = os.ReadFile(path)
	must(t, err)
	i := strings.Index(string(data), s["followup"].ID)
	must(t, os.WriteFile(path, append(append(data[:i:i], "XXXX"...), data[i+4:]...), 0o600))
	msgs, err := r.Inbox(context.Background(), "t1", run.InboxOptions{Peek: true})
	must(t, err)
	found := false
	for _, m := range msgs {
		if m.ID == s["followup"].ID {
			found = m.Body == s["followup"].Body
		}
	}
	if !found {
		t.Errorf("the follow-up behind a damaged mailbox line is not read right: %+v", msgs)
	}
	_, err = r.Repair(context.Background())
	must(t, err)
	checkMailboxes(t, r, "after Repair")
}

// TestMailboxBehindLogCaughtUp: a mailbox file that lost its last line
// (a crash after the log's fsync: projections are not fsynced) gets it
// back with the next write, in order, not after the new line.
func TestMailboxBehindLogCaughtUp(t *testing.T) {
	for _, file := range mailbox.Files {
		t.Run(file, func(t *testing.T) {
			r := newTestRun(t)
			scenario(t, r, nil)
			path := fl(r).MailboxPath(file)
			data, err := os.ReadFile(path)
			must(t, err)
			cut := strings.LastIndexByte(string(data[:len(data)-1]), '\n') + 1
			must(t, os.WriteFile(path, data[:cut], 0o600))
			_, err = reopen(t, r).Send(context.Background(), run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: "x"})
			must(t, err)
			checkMailboxes(t, r, "after the next write")
		})
	}
}

// TestCrashBetweenCommitAndProjection: an event that reached the log but
// none of its projections (the writer died right after its fsync) is read
// at once, and the next write projects it: mailbox line, mail-tree copy,
// tasks.json.
func TestCrashBetweenCommitAndProjection(t *testing.T) {
	for _, sameRun := range []bool{true, false} {
		t.Run(fmt.Sprintf("same Run %v", sameRun), func(t *testing.T) {
			r := newTestRun(t)
			scenario(t, r, nil)
			st, err := r.State()
			must(t, err)
			seq := st.Seq + 1
			id := uuid.Must(uuid.NewV7()).String()
			at := events.Now()
			e := events.Event{Seq: seq, At: at, Type: events.MessageSent, Run: r.ID(), Task: "t3", Actor: "leader",
				Message: &events.Message{ID: id, Seq: seq, Run: r.ID(), Task: "t3", Kind: events.KindSteer, Direction: events.Inbox,
					From: "leader", To: "t3", Body: "committed, never projected", Priority: "normal", Status: events.StatusPending, SentAt: at}}
			line, err := events.Marshal(&e)
			must(t, err)
			f, err := os.OpenFile(fl(r).EventsPath(), os.O_WRONLY|os.O_APPEND, 0)
			must(t, err)
			_, err = f.Write(line)
			must(t, err)
			must(t, f.Close())

			// Readers see it at once, from the log.
			msgs, err := reopen(t, r).Inbox(context.Background(), "t3", run.InboxOptions{Peek: true})
			must(t, err)
			if len(msgs) == 0 || msgs[len(msgs)-1].ID != id || msgs[len(msgs)-1].Body != e.Message.Body {
				t.Fatalf("t3's inbox does not show the committed steer: %+v", msgs)
			}

			w := r
			if !sameRun {
				w = reopen(t, r)
			}
			_, err = w.AddTask(context.Background(), "t4", state.TaskSpec{}, "leader")
			must(t, err)
			w.Sync() // tasks.json follows the operation's return
			checkMailboxes(t, r, "after the next write")
			if readFlag(t, r, "w3", id) {
				t.Error("the caught-up copy is marked read")
			}
			snap := fl(r).ReadSnapshot() // tasks.json holds the tasks; the open messages are in the state read
			st, err = reopen(t, r).State()
			must(t, err)
			if snap.Seq != seq+1 || st.Open[id] == nil {
				t.Errorf("tasks.json after the next write: seq %d (want %d), open steer %v", snap.Seq, seq+1, st.Open[id])
			}
		})
	}
}

// TestRepairRedeliversMailTree: mail-tree copies deleted come back with
// Repair, under the same names, with read flags that follow the log.
func TestRepairRedeliversMailTree(t *testing.T) {
	r := newTestRun(t)
	s := scenario(t, r, nil)
	before := treeFlags(t, r)

	// The flags follow the log: read = delivered or acknowledged (or, for
	// the leader's copy of a question, answered).
	wantRead := []struct {
		agent, msg string
		read       bool
	}{
		{"leader", "q1", true},     // answered
		{"leader", "q2", false},    // open
		{"leader", "report", true}, // read through the leader's inbox
		{"t1", "r1", true},         // delivered, acknowledged
		{"t1", "followup", true},   // delivered
		{"t1", "broadcast", true},  // delivered
		{"t2", "broadcast", false}, // t2 only peeked
		{"w3", "broadcast", false}, // never read
		{"w3", "nudge", false},     // never read
		{"t2", "steer", true},      // rejected: seen
	}
	check := func(what string) {
		t.Helper()
		for _, w := range wantRead {
			if got := readFlag(t, r, w.agent, s[w.msg].ID); got != w.read {
				t.Errorf("%s: %s's copy of %s: read=%v, want %v", what, w.agent, w.msg, got, w.read)
			}
		}
	}
	check("as delivered")
	if n := len(before); n != 10 {
		t.Errorf("%d copies in the mail tree, want 10 (leader 3, t1 3, t2 2, w3 2): %v", n, before)
	}

	tree := tree(r)
	agents, err := tree.Agents()
	must(t, err)
	for _, a := range agents {
		ents, err := os.ReadDir(tree.Dir(a))
		must(t, err)
		for _, e := range ents {
			if !e.IsDir() {
				must(t, os.Remove(filepath.Join(tree.Dir(a), e.Name())))
			}
		}
	}
	if n := len(treeFlags(t, r)); n != 0 {
		t.Fatalf("%d copies left after deleting them all", n)
	}
	_, err = r.Repair(context.Background())
	must(t, err)
	after := treeFlags(t, r)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("mail tree after Repair\n%v\nwant\n%v", after, before)
	}
	check("after Repair")

	// Repair again: nothing delivered twice.
	_, err = r.Repair(context.Background())
	must(t, err)
	if again := treeFlags(t, r); fmt.Sprint(again) != fmt.Sprint(before) {
		t.Errorf("a second Repair changed the mail tree:\n%v", again)
	}
}

// TestGroupCommit: goroutines sending at once through one *run.Run share
// commits; seq stays dense, each call returns its own message (at its own
// seq), nothing is lost or written twice, and a refused operation in a
// batch takes no seq.
func TestGroupCommit(t *testing.T) {
	r := newTestRun(t)
	ctx := context.Background()
	for _, id := range []string{"t1", "t2"} {
		_, err := r.AddTask(ctx, id, state.TaskSpec{}, "leader")
		must(t, err)
	}
	_, err := r.Transition(ctx, "t1", task.Start, "t1", "", nil)
	must(t, err)
	const workers, each = 16, 15
	type result struct {
		body string
		m    *events.Message
		err  error
	}
	results := make(chan result, workers*each*2)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				body := fmt.Sprintf("worker %d message %d", w, i)
				m, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: body})
				results <- result{body, m, err}
				// Refused in the same batches: t2 is not waiting.
				_, err = r.Send(ctx, run.SendOptions{Kind: events.KindResponse, Task: "t2", From: "leader", Body: "no"})
				if !errors.Is(err, crew.ErrConflict) {
					results <- result{"refused", nil, fmt.Errorf("a response to a pending task: %v, want a conflict", err)}
				}
			}
		}()
	}
	wg.Wait()
	close(results)
	seqs := map[int64]string{}
	ids := map[string]bool{}
	for res := range results {
		if res.err != nil {
			t.Fatal(res.err)
		}
		if res.m.Body != res.body {
			t.Errorf("Send(%q) returned the message %q", res.body, res.m.Body)
		}
		if other, dup := seqs[res.m.Seq]; dup {
			t.Errorf("seq %d returned to %q and %q", res.m.Seq, other, res.body)
		}
		seqs[res.m.Seq] = res.body
		ids[res.m.ID] = true
	}
	if len(seqs) != workers*each || len(ids) != workers*each {
		t.Fatalf("%d seqs and %d ids for %d sends", len(seqs), len(ids), workers*each)
	}
	evs := logEvents(t, r) // fails on a gap or a repeated seq
	var sentBodies []string
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i+1, e.Seq)
		}
		if e.Type == events.MessageSent {
			if seqs[e.Seq] != e.Message.Body {
				t.Errorf("seq %d holds %q, but that seq was returned for %q", e.Seq, e.Message.Body, seqs[e.Seq])
			}
			sentBodies = append(sentBodies, e.Message.Body)
		}
		if e.Type == events.TaskResponded {
			t.Errorf("a refused response reached the log at seq %d", e.Seq)
		}
	}
	if len(sentBodies) != workers*each {
		t.Errorf("%d steers in the log, want %d", len(sentBodies), workers*each)
	}
	// Each goroutine's own order is kept.
	last := map[int]int{}
	for _, b := range sentBodies {
		var w, i int
		fmt.Sscanf(b, "worker %d message %d", &w, &i)
		if prev, ok := last[w]; ok && i != prev+1 {
			t.Errorf("worker %d: message %d logged after %d", w, i, prev)
		}
		last[w] = i
	}
	checkMailboxes(t, r, "after concurrent sends")
	entries, _, err := tree(r).List("t1", false)
	must(t, err)
	if len(entries) != workers*each {
		t.Errorf("t1's mail tree holds %d copies, want %d", len(entries), workers*each)
	}
}

// TestMailboxFileFIFONotOpened: a mailbox file replaced by a FIFO (a
// writer holding it open, so that an open(2) of it would not block) is
// tampering (docs/files.md, Permissions): the next operation stands, and
// the FIFO is neither opened nor mended. Opened, a FIFO without a writer
// would hang the operation, the run lock held.
func TestMailboxFileFIFONotOpened(t *testing.T) {
	r := newTestRun(t)
	ctx := context.Background()
	_, err := r.AddTask(ctx, "t1", state.TaskSpec{}, "leader")
	must(t, err)
	_, err = r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: "a"})
	must(t, err)
	path := fl(r).MailboxPath(mailbox.SteeringFile)
	must(t, os.Remove(path))
	must(t, syscall.Mkfifo(path, 0o600))
	w, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	defer w.Close()
	m, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: "b"})
	must(t, err)
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("%s, a FIFO, was replaced: %v %v", path, fi.Mode(), err)
	}
	if evs := logEvents(t, r); evs[len(evs)-1].Message == nil || evs[len(evs)-1].Message.ID != m.ID {
		t.Errorf("the steer is not the log's last event")
	}
}
