package runtest

// The operation-level suite: run.Run on a root of the store. Every test
// here runs the same code against every store; where stores may differ
// (a file store has files to repair, a NATS store has none), the test
// asks the store which it is.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/proctest"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
	"github.com/crew-dev/crew/supervise"
	"github.com/crew-dev/crew/task"
)

// newRun creates run r1 on s's root with tasks, each given by id.
func newRun(t *testing.T, s Store, tasks ...string) *run.Run {
	t.Helper()
	r, err := s.Root.Create(run.CreateOptions{ID: "r1", Title: "conformance", Leader: "leader"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range tasks {
		if _, err := r.AddTask(context.Background(), id, state.TaskSpec{}, "leader"); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// res is a call's value and error: of(f()).must(t) is f's value, or the
// test fails with its error.
type res[T any] struct {
	v   T
	err error
}

func of[T any](v T, err error) res[T] { return res[T]{v, err} }

func (r res[T]) must(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func send(t *testing.T, r *run.Run, kind, taskID, body string) *events.Message {
	t.Helper()
	from := "leader"
	if kind == events.KindQuestion || kind == events.KindReport {
		from = taskID
	}
	return of(r.Send(context.Background(), run.SendOptions{Kind: kind, Task: taskID, From: from, Body: body})).must(t)
}

func status(t *testing.T, r *run.Run, id string) task.State {
	t.Helper()
	st := of(r.TaskState()).must(t)
	if st.Tasks[id] == nil {
		t.Fatalf("no task %s", id)
	}
	return st.Tasks[id].Status
}

func head(t *testing.T, r *run.Run) int64 {
	t.Helper()
	return of(r.TaskState()).must(t).Seq
}

// The table of docs/state-machine.md (Task states), written out here
// rather than taken from package task, so that a change to either shows.
var transitions = map[string]map[task.State]task.State{
	"start":    {task.Pending: task.Running},
	"ask":      {task.Running: task.Waiting},
	"respond":  {task.Waiting: task.Running},
	"complete": {task.Running: task.Completed},
	"fail":     {task.Pending: task.Failed, task.Running: task.Failed, task.Waiting: task.Failed},
	"cancel":   {task.Pending: task.Cancelled, task.Running: task.Cancelled, task.Waiting: task.Cancelled},
	"retry":    {task.Failed: task.Pending, task.Cancelled: task.Pending},
}

var allStates = []task.State{task.Pending, task.Running, task.Waiting, task.Completed, task.Failed, task.Cancelled}

// reach brings task id of r from pending to state.
func reach(t *testing.T, r *run.Run, id string, state task.State) {
	t.Helper()
	ctx := context.Background()
	tr := func(op task.Op) { of(r.Transition(ctx, id, op, "leader", "", nil)).must(t) }
	switch state {
	case task.Pending:
	case task.Running:
		tr(task.Start)
	case task.Waiting:
		tr(task.Start)
		send(t, r, events.KindQuestion, id, "Which DB?")
	case task.Completed:
		tr(task.Start)
		tr(task.Complete)
	case task.Failed:
		tr(task.Fail)
	case task.Cancelled:
		tr(task.Cancel)
	}
	if got := status(t, r, id); got != state {
		t.Fatalf("reach %s: task %s is %s", state, id, got)
	}
}

// do applies one operation of the table to task id.
func do(r *run.Run, id, op string) error {
	ctx := context.Background()
	switch op {
	case "ask":
		_, err := r.Send(ctx, run.SendOptions{Kind: events.KindQuestion, Task: id, From: id, Body: "May I?"})
		return err
	case "respond":
		_, err := r.Send(ctx, run.SendOptions{Kind: events.KindResponse, Task: id, From: "leader", Body: "Yes."})
		return err
	}
	_, err := r.Transition(ctx, id, task.Op(op), "leader", "because", nil)
	return err
}

// Every operation of docs/state-machine.md from every state: the
// table's transitions happen (one event, the task in its new state),
// every other one is refused with ErrConflict, a message naming the task
// and its state, and nothing written.
func testRunTransitions(t *testing.T, s Store) {
	r := newRun(t, s)
	n := 0
	for _, op := range slices.Sorted(func(yield func(string) bool) {
		for op := range transitions {
			if !yield(op) {
				return
			}
		}
	}) {
		for _, from := range allStates {
			n++
			id := fmt.Sprintf("t%d", n)
			of(r.AddTask(context.Background(), id, state.TaskSpec{}, "leader")).must(t)
			reach(t, r, id, from)
			before := head(t, r)
			err := do(r, id, op)
			to, allowed := transitions[op][from]
			switch {
			case allowed && err != nil:
				t.Errorf("%s from %s: %v; want %s", op, from, err, to)
			case allowed:
				if got := status(t, r, id); got != to {
					t.Errorf("%s from %s: task is %s; want %s", op, from, got, to)
				}
				if h := head(t, r); h != before+1 {
					t.Errorf("%s from %s wrote %d events; want 1", op, from, h-before)
				}
			case !errors.Is(err, crew.ErrConflict):
				t.Errorf("%s from %s: %v; want ErrConflict", op, from, err)
			default:
				if !strings.Contains(err.Error(), "task "+id+" is "+string(from)) {
					t.Errorf("%s from %s: %q does not name the task and its state", op, from, err)
				}
				if got, h := status(t, r, id), head(t, r); got != from || h != before {
					t.Errorf("refused %s from %s: task is %s and %d events written; want it unchanged", op, from, got, h-before)
				}
			}
		}
	}
}

// steer, follow-up, nudge and report change no state and are refused
// for terminal tasks (exit 3).
func testRunMessagesAndTerminalTasks(t *testing.T, s Store) {
	r := newRun(t, s)
	for i, from := range allStates {
		id := fmt.Sprintf("t%d", i)
		of(r.AddTask(context.Background(), id, state.TaskSpec{}, "leader")).must(t)
		reach(t, r, id, from)
		for _, kind := range []string{events.KindSteer, events.KindFollowUp, events.KindNudge, events.KindReport} {
			from2 := "leader"
			if kind == events.KindReport {
				from2 = id
			}
			_, err := r.Send(context.Background(), run.SendOptions{Kind: kind, Task: id, From: from2, Body: "hello"})
			if from.Terminal() != errors.Is(err, crew.ErrConflict) || (!from.Terminal() && err != nil) {
				t.Errorf("%s to a %s task: %v", kind, from, err)
			}
			if got := status(t, r, id); got != from {
				t.Errorf("%s changed task %s from %s to %s", kind, id, from, got)
			}
		}
	}
}

// A worker's view: cursors (--since), unread, and each message's status
// pending -> delivered -> acknowledged | rejected, computed from the log;
// the leader's view of what workers sent; what is pending for each; and
// the mail tree's copies, whose read flags follow the run.
//
// One conversation, whose statuses each depend on the steps before it,
// told in parts: the worker reads (inboxStory.read), acknowledges
// (acknowledge), the leader reads and answers (leader), and the mail
// tree and the log show it all (mailTree, cursor).
func testRunInboxCursorsAndDeliveryStatus(t *testing.T, s Store) {
	r := newRun(t, s, "t1", "t2")
	reach(t, r, "t1", task.Running)
	c := &inboxStory{s: s, r: r}
	c.m1 = send(t, r, events.KindSteer, "t1", "steer one")
	c.m2 = send(t, r, events.KindFollowUp, "t1", "follow-up two")
	c.m3 = send(t, r, events.KindNudge, "t1", "")
	c.b = send(t, r, events.KindMessage, events.Broadcast, "to everyone")
	c.read(t)
	c.acknowledge(t)
	c.leader(t)
	c.mailTree(t)
	c.cursor(t)
}

// inboxStory is the conversation of testRunInboxCursorsAndDeliveryStatus:
// three messages to t1 (m1, m2, m3) and a broadcast b, then t1's
// question q and the leader's response resp.
type inboxStory struct {
	s             Store
	r             *run.Run
	m1, m2, m3, b *events.Message
	q, resp       *events.Message
}

// read: a peek shows every message pending; --since shows only what
// came after the cursor and marks it delivered (one event); --unread
// what is not.
func (c *inboxStory) read(t *testing.T) {
	ctx, r := context.Background(), c.r
	peek := of(r.Inbox(ctx, "t1", run.InboxOptions{Peek: true})).must(t)
	if got := ids(peek); fmt.Sprint(got) != fmt.Sprint([]string{c.m1.ID, c.m2.ID, c.m3.ID, c.b.ID}) {
		t.Fatalf("t1's inbox = %v; want its three messages and the broadcast, in order", got)
	}
	for _, m := range peek {
		if m.Status != events.StatusPending || m.DeliveredAt != nil {
			t.Errorf("peeked %s %s: status %s; want pending", m.Kind, m.ID, m.Status)
		}
	}
	if c.m3.Body != run.DefaultNudge {
		t.Errorf("nudge without a body: %q; want the default", c.m3.Body)
	}
	before := head(t, r)
	since := of(r.Inbox(ctx, "t1", run.InboxOptions{Since: c.m2.Seq})).must(t)
	if got := ids(since); fmt.Sprint(got) != fmt.Sprint([]string{c.m3.ID, c.b.ID}) {
		t.Fatalf("inbox since seq %d = %v; want the nudge and the broadcast", c.m2.Seq, got)
	}
	for _, m := range since {
		if m.Status != events.StatusDelivered || m.DeliveredAt == nil {
			t.Errorf("read %s: status %s, deliveredAt %v; want delivered", m.ID, m.Status, m.DeliveredAt)
		}
		if m.To != "t1" {
			t.Errorf("read %s: to %q; want t1 (a broadcast shows the reader's copy)", m.ID, m.To)
		}
	}
	if h := head(t, r); h != before+1 {
		t.Errorf("reading two pending messages wrote %d events; want one message.delivered", h-before)
	}
	unread := of(r.Inbox(ctx, "t1", run.InboxOptions{Unread: true})).must(t)
	if got := ids(unread); fmt.Sprint(got) != fmt.Sprint([]string{c.m1.ID, c.m2.ID}) {
		t.Errorf("unread = %v; want the two not yet delivered", got)
	}
}

// acknowledge: acknowledge and reject close messages, the rest stay
// shown; t2 has its own copy of the broadcast; acknowledging twice is a
// no-op, rejecting a closed one, another's or an unknown one is not.
func (c *inboxStory) acknowledge(t *testing.T) {
	ctx, r := context.Background(), c.r
	if err := r.Acknowledge(ctx, "t1", []string{c.m1.ID}, false, ""); err != nil {
		t.Fatal(err)
	}
	if err := r.Acknowledge(ctx, "t1", []string{c.m2.ID}, true, "not now"); err != nil {
		t.Fatal(err)
	}
	if got := ids(of(r.Inbox(ctx, "t1", run.InboxOptions{})).must(t)); fmt.Sprint(got) != fmt.Sprint([]string{c.m3.ID, c.b.ID}) {
		t.Errorf("after ack and reject, inbox = %v; want the nudge and the broadcast", got)
	}
	t2 := of(r.Inbox(ctx, "t2", run.InboxOptions{Peek: true})).must(t)
	if len(t2) != 1 || t2[0].ID != c.b.ID || t2[0].Status != events.StatusPending {
		t.Errorf("t2's inbox = %+v; want its own pending copy of the broadcast", t2)
	}
	if err := r.Acknowledge(ctx, "t1", []string{c.m1.ID}, false, ""); err != nil {
		t.Errorf("acknowledge again: %v; want nil", err)
	}
	for _, a := range []struct {
		who, id string
		reject  bool
		want    error
	}{
		{"t1", c.m1.ID, true, crew.ErrConflict},
		{"t2", c.m3.ID, false, crew.ErrConflict},
		{"t1", "01900000-0000-7000-8000-000000000000", false, crew.ErrNotFound},
		{"t1", "not-a-uuid", false, crew.ErrInvalid},
	} {
		if err := r.Acknowledge(ctx, a.who, []string{a.id}, a.reject, ""); !errors.Is(err, a.want) {
			t.Errorf("%s acknowledges %s (reject %v): %v; want %v", a.who, a.id, a.reject, err, a.want)
		}
	}
	// What is pending for the worker: its unacknowledged messages.
	p := of(r.Pending("t1")).must(t)
	if got := ids(p.Messages); fmt.Sprint(got) != fmt.Sprint([]string{c.m3.ID, c.b.ID}) {
		t.Errorf("pending for t1 = %v", got)
	}
}

// leader: the leader's view, every open question and report, urgent
// first; its response replies to the question.
func (c *inboxStory) leader(t *testing.T) {
	ctx, r := context.Background(), c.r
	c.q = send(t, r, events.KindQuestion, "t1", "Which DB?")
	rep := of(r.Send(ctx, run.SendOptions{Kind: events.KindReport, Task: "t1", From: "t1", Body: "disk full", Priority: "urgent"})).must(t)
	lp := of(r.Pending(run.Leader)).must(t)
	if got := ids(lp.Messages); fmt.Sprint(got) != fmt.Sprint([]string{rep.ID, c.q.ID}) {
		t.Errorf("leader's pending = %v; want the urgent report, then the question", got)
	}
	if len(lp.Messages) == 2 && (lp.Messages[1].Task != "t1" || lp.Messages[1].Body != "Which DB?") {
		t.Errorf("leader's pending question = %+v; want t1's question with its body", lp.Messages[1])
	}
	if got := ids(of(r.Inbox(ctx, run.Leader, run.InboxOptions{})).must(t)); fmt.Sprint(got) != fmt.Sprint([]string{c.q.ID, rep.ID}) {
		t.Errorf("outbox = %v; want the question and the report", got)
	}
	c.resp = send(t, r, events.KindResponse, "t1", "Postgres.")
	if c.resp.ReplyTo != c.q.ID {
		t.Errorf("response replyTo %q; want the question %s", c.resp.ReplyTo, c.q.ID)
	}
}

// mailTree: every message has its copy in its recipient's mailbox, read
// once the run says it was delivered.
func (c *inboxStory) mailTree(t *testing.T) {
	want := map[string]bool{c.m1.ID: true, c.m2.ID: true, c.m3.ID: true, c.b.ID: true, c.resp.ID: false}
	mails, bad, err := c.s.Root.Mail().List("t1", false)
	if err != nil || len(bad) > 0 {
		t.Fatalf("t1's mail: %v %v", err, bad)
	}
	got := map[string]bool{}
	for _, e := range mails {
		got[e.Mail.ID] = e.Mail.Read
		if e.Mail.Run != "r1" || e.Mail.Task == "" || e.Mail.Kind == "" {
			t.Errorf("copy %s lacks its run, task or kind: %+v", e.Mail.ID, e.Mail)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("t1's mail tree (id: read) = %v; want %v", got, want)
	}
	leaderMail := of(c.s.Root.Mail().Find("leader", c.q.ID)).must(t)
	if !leaderMail.Mail.Read {
		t.Errorf("the answered question's copy in the leader's mailbox is unread")
	}
}

// cursor: the log read from a cursor after m2, dense to its end.
func (c *inboxStory) cursor(t *testing.T) {
	r := c.r
	cur := of(r.Events(c.m2.Seq)).must(t)
	defer cur.Close()
	var seqs []int64
	if err := cur.Scan(nil, func(e *events.Event) error { seqs = append(seqs, e.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seqs) == 0 || seqs[0] != c.m2.Seq+1 || seqs[len(seqs)-1] != head(t, r) {
		t.Errorf("events since %d: %v; want %d..%d", c.m2.Seq, seqs, c.m2.Seq+1, head(t, r))
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("events since %d: %v; not dense", c.m2.Seq, seqs)
		}
	}
}

func ids(ms []events.Message) []string {
	return proctest.Pluck(ms, func(m events.Message) string { return m.ID })
}

// Bad input is refused with ErrInvalid (exit 2), unknown things with
// ErrNotFound (4), and nothing is written.
func testRunBadInput(t *testing.T, s Store) {
	ctx := context.Background()
	r := newRun(t, s, "t1")
	reach(t, r, "t1", task.Running)
	s.Root.MaxBody = 64
	steer := send(t, r, events.KindSteer, "t1", "x")
	before := head(t, r)
	for _, c := range []struct {
		what string
		err  error
		want error
	}{
		{"task id a/b", second(r.AddTask(ctx, "a/b", state.TaskSpec{}, "leader")), crew.ErrInvalid},
		{"task id leader", second(r.AddTask(ctx, "leader", state.TaskSpec{}, "leader")), crew.ErrInvalid},
		{"task T1 beside t1", second(r.AddTask(ctx, "T1", state.TaskSpec{}, "leader")), crew.ErrConflict},
		{"agent a.b", second(r.AddTask(ctx, "t9", state.TaskSpec{Agent: "a.b"}, "leader")), crew.ErrInvalid},
		{"invalid UTF-8", second(r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: "bad \xff"})), crew.ErrInvalid},
		{"over --max-body", second(r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: strings.Repeat("x", 65)})), crew.ErrInvalid},
		{"empty body", second(r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: " "})), crew.ErrInvalid},
		{"priority", second(r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: "x", Priority: "soon"})), crew.ErrInvalid},
		{"kind", second(r.Send(ctx, run.SendOptions{Kind: "memo", Task: "t1", From: "leader", Body: "x"})), crew.ErrInvalid},
		{"unknown task", second(r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "nope", From: "leader", Body: "x"})), crew.ErrNotFound},
		{"unknown task transition", second(r.Transition(ctx, "nope", task.Start, "leader", "", nil)), crew.ErrNotFound},
		{"await a non-question", second(r.Await(ctx, steer.ID)), crew.ErrInvalid},
		{"await unknown", second(r.Await(ctx, "01900000-0000-7000-8000-000000000000")), crew.ErrNotFound},
		{"unknown run", second(s.Root.Open("nope")), crew.ErrNotFound},
		{"run id a.b", second(s.Root.Open("a.b")), crew.ErrInvalid},
		{"run r1 again", second(s.Root.Create(run.CreateOptions{ID: "r1"})), crew.ErrConflict},
		{"run R1 beside r1", second(s.Root.Create(run.CreateOptions{ID: "R1"})), crew.ErrConflict},
		{"run id ..", second(s.Root.Create(run.CreateOptions{ID: ".."})), crew.ErrInvalid},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v; want %v", c.what, c.err, c.want)
		}
	}
	if h := head(t, r); h != before {
		t.Errorf("refused operations wrote %d events", h-before)
	}
	runs, bad, err := s.Root.List()
	if err != nil || len(bad) > 0 || len(runs) != 1 || runs[0].ID != "r1" {
		t.Errorf("runs after refused creations: %v %v %v; want r1 only", runs, bad, err)
	}
	// Repair is for a store whose logs can be damaged and repaired (a
	// file store, store.Repairer); on a store without them (NATS) it is
	// refused (exit 2).
	_, repairable := s.Root.Store.(store.Repairer)
	if _, err := r.Repair(ctx); repairable && err != nil || !repairable && !errors.Is(err, crew.ErrInvalid) {
		t.Errorf("repair on %s (repairable: %v): %v", s.Name, repairable, err)
	}
}

// second returns the error of a call that returns a value and an error.
func second[T any](_ T, err error) error { return err }

// The per-agent mail tree outside runs (crew mail): delivery to an
// existing mailbox only unless asked, read flags, archive as a move that
// never takes an unread message unless asked, and a run message's copy
// whose reading is recorded in the run.
func testRunMailTree(t *testing.T, s Store) {
	ctx := context.Background()
	mail := func(o run.MailOptions) (mailbox.Mail, error) { return s.Root.SendMail(o) }
	if _, err := mail(run.MailOptions{To: "reviewer", From: "builder", Body: "PR ready"}); !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("mail to an agent without a mailbox: %v; want ErrNotFound", err)
	}
	if s.Root.Mail().Exists("reviewer") {
		t.Errorf("a refused delivery created the mailbox")
	}
	m1 := of(mail(run.MailOptions{To: "reviewer", From: "builder", Body: "PR ready", CreateRecipient: true})).must(t)
	m2 := of(mail(run.MailOptions{To: "reviewer", From: "builder", Subject: "second", Type: "merge_notification", Priority: "high"})).must(t)
	for _, bad := range []run.MailOptions{
		{To: "reviewer", From: "builder", Body: "x", Type: "memo"},
		{To: "../x", From: "builder", Body: "x"},
		{To: "reviewer", From: "builder"},
		{To: "reviewer", From: "builder", Body: "bad \xff"},
	} {
		if _, err := mail(bad); !errors.Is(err, crew.ErrInvalid) {
			t.Errorf("mail %+v: %v; want ErrInvalid", bad, err)
		}
	}
	if _, err := mail(run.MailOptions{To: "Reviewer", From: "x", Body: "x", CreateRecipient: true}); !errors.Is(err, crew.ErrConflict) {
		t.Errorf("a mailbox Reviewer beside reviewer: %v; want ErrConflict", err)
	}
	list := mails(s.Root.Mail().List("reviewer", false)).must(t)
	if len(list) != 2 || list[0].Mail.ID != m1.ID || list[1].Mail.ID != m2.ID || list[0].Mail.Read || list[1].Mail.Subject != "second" {
		t.Fatalf("reviewer's mail = %+v; want both, unread, oldest first", list)
	}
	if list[0].Name != mailbox.Name(m1) {
		t.Errorf("name %q; want %q (docs/mail-tree.md, File names)", list[0].Name, mailbox.Name(m1))
	}
	read := of(s.Root.ReadMail(ctx, "reviewer", []string{m1.ID})).must(t)
	if len(read) != 1 || !read[0].Mail.Read || read[0].Mail.Body != "PR ready" {
		t.Errorf("read = %+v", read)
	}
	if _, err := s.Root.ReadMail(ctx, "reviewer", []string{"01900000-0000-7000-8000-000000000000"}); !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("read unknown: %v; want ErrNotFound", err)
	}
	// Archive: the read one moves, the unread one stays unless asked.
	now := time.Now().Add(time.Hour)
	if moved, err := s.Root.Mail().Archive("reviewer", 0, false, now); err != nil || len(moved) != 1 || moved[0] != mailbox.Name(m1) {
		t.Errorf("archive = %v, %v; want the read message only", moved, err)
	}
	if list := mails(s.Root.Mail().List("reviewer", false)).must(t); len(list) != 1 || list[0].Mail.ID != m2.ID {
		t.Errorf("after archive: %+v; want the unread one only", list)
	}
	if all := mails(s.Root.Mail().List("reviewer", true)).must(t); len(all) != 2 || !slices.ContainsFunc(all, func(e mailbox.Entry) bool { return e.Archived && e.Mail.ID == m1.ID }) {
		t.Errorf("with the archive: %+v", all)
	}
	// Delivering an archived message again does not bring it back.
	if _, err := s.Root.Mail().Deliver("reviewer", m1, false); err != nil {
		t.Fatal(err)
	}
	if list := mails(s.Root.Mail().List("reviewer", false)).must(t); len(list) != 1 {
		t.Errorf("an archived message delivered again shows as new: %+v", list)
	}
	if moved, err := s.Root.Mail().Archive("reviewer", 0, true, now); err != nil || len(moved) != 1 {
		t.Errorf("archive --include-unread = %v, %v", moved, err)
	}
	if agents := of(s.Root.Mail().Agents()).must(t); fmt.Sprint(agents) != "[reviewer]" {
		t.Errorf("agents = %v", agents)
	}

	// A run message's copy: reading it records the delivery in the
	// run, which sets the flag (one source of truth).
	r := newRun(t, s, "t1")
	reach(t, r, "t1", task.Running)
	st := send(t, r, events.KindSteer, "t1", "use the new API")
	cp := of(s.Root.Mail().Find("t1", st.ID)).must(t)
	if cp.Mail.Read || cp.Mail.Kind != events.KindSteer || cp.Mail.Run != "r1" {
		t.Errorf("copy of the steer: %+v", cp.Mail)
	}
	of(s.Root.ReadMail(ctx, "t1", []string{st.ID})).must(t)
	in := of(r.Inbox(ctx, "t1", run.InboxOptions{Peek: true})).must(t)
	if len(in) != 1 || in[0].Status != events.StatusDelivered {
		t.Errorf("after reading its copy, the steer is %+v; want delivered", in)
	}
	if cp := of(s.Root.Mail().Find("t1", st.ID)).must(t); !cp.Mail.Read {
		t.Errorf("the copy's read flag does not follow the run")
	}
}

// mails is a mail tree's List result: mails(l.List(…)).must(t) is the
// list, or the test fails if any message or the mailbox could not be
// read.
func mails(l []mailbox.Entry, bad []error, err error) res[[]mailbox.Entry] {
	return res[[]mailbox.Entry]{l, errors.Join(append(bad, err)...)}
}

// A run message whose writer died after its append and before its mail
// copy: the next operation on the run delivers the copy
// (Store.AppendUnprojected stands for that writer: it appends and
// projects nothing).
func testRunLostCopyIsDeliveredByTheNextWriter(t *testing.T, s Store) {
	if s.AppendUnprojected == nil {
		t.Skipf("store %s has no AppendUnprojected", s.Name)
	}
	r := newRun(t, s, "t1")
	reach(t, r, "t1", task.Running)
	h := head(t, r)
	lost := &events.Event{Seq: h + 1, At: events.Now(), Type: events.MessageSent, Run: "r1", Task: "t1", Actor: "leader",
		Message: &events.Message{ID: "01900000-0000-7000-8000-00000000a001", Seq: h + 1, Run: "r1", Task: "t1", Kind: events.KindSteer,
			Direction: events.Inbox, From: "leader", To: "t1", Body: "lost copy", Priority: events.DefaultPriority, Status: events.StatusPending, SentAt: events.Now()}}
	if err := s.AppendUnprojected(context.Background(), lost); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Root.Mail().Find("t1", lost.Message.ID); !errors.Is(err, crew.ErrNotFound) {
		t.Fatalf("the copy is there before any writer delivered it: %v", err)
	}
	r2 := of(s.Root.Open("r1")).must(t) // another process's view
	send(t, r2, events.KindFollowUp, "t1", "next")
	cp, err := s.Root.Mail().Find("t1", lost.Message.ID)
	if err != nil || cp.Mail.Body != "lost copy" {
		t.Fatalf("after the next write, the lost copy is %+v, %v; want it delivered", cp.Mail, err)
	}
	if n := len(mails(s.Root.Mail().List("t1", false)).must(t)); n != 2 {
		t.Errorf("t1 has %d copies; want 2 (each once)", n)
	}
}

// Of several processes responding to one waiting task at once, exactly
// one succeeds and the others get ErrConflict (exit 3); the log holds one
// task.responded.
func testRunRespondRaceExactlyOneWins(t *testing.T, s Store) {
	r := newRun(t, s, "t1")
	reach(t, r, "t1", task.Waiting)
	const n = 6
	outs := proctest.Race(t, s.Addr, n, "respond", "leader")
	won, lost := 0, 0
	for i, out := range outs {
		switch strings.TrimSpace(out) {
		case "won":
			won++
		case "lost":
			lost++
		default:
			t.Errorf("responder %d: %q", i, out)
		}
	}
	if won != 1 || lost != n-1 {
		t.Fatalf("%d won, %d lost; want exactly one winner", won, lost)
	}
	responded := 0
	c := of(r.Events(0)).must(t)
	defer c.Close()
	c.Scan(nil, func(e *events.Event) error {
		if e.Type == events.TaskResponded {
			responded++
		}
		return nil
	})
	if responded != 1 || status(t, r, "t1") != task.Running {
		t.Errorf("%d task.responded events, task %s; want one, running", responded, status(t, r, "t1"))
	}
}

// Writers in several processes send through the run at once: nothing is
// lost or duplicated, seq stays dense, each writer's order is kept, and
// every message has its one mail copy.
func testRunConcurrentWriters(t *testing.T, s Store) {
	r := newRun(t, s, "t1")
	const writers, per = 3, 10
	outs := proctest.Race(t, s.Addr, writers, "steer", "w", fmt.Sprint(per))
	for i, out := range outs {
		if strings.TrimSpace(out) != "ok" {
			t.Fatalf("writer %d: %q", i, out)
		}
	}
	next := map[string]int{}
	var seq int64
	c := of(r.Events(0)).must(t)
	defer c.Close()
	c.Scan(func(de *events.DamageError) { t.Errorf("damage: %v", de) }, func(e *events.Event) error {
		if e.Seq != seq+1 {
			t.Fatalf("seq %d after %d: not dense", e.Seq, seq)
		}
		seq = e.Seq
		if m := e.Message; m != nil {
			who, k, _ := strings.Cut(m.Body, "-")
			if want := fmt.Sprint(next[who]); k != want {
				t.Fatalf("seq %d: %s; want %s-%s (each writer's order kept)", e.Seq, m.Body, who, want)
			}
			next[who]++
		}
		return nil
	})
	for i := range writers {
		if got := next[fmt.Sprint("w", i)]; got != per {
			t.Errorf("writer w%d: %d messages in the log; want %d", i, got, per)
		}
	}
	if n := len(mails(s.Root.Mail().List("t1", false)).must(t)); n != writers*per {
		t.Errorf("t1 has %d mail copies; want %d", n, writers*per)
	}
}

// A worker blocked in ask --wait (another process) is woken by the
// leader's response and gets it; a worker that restarts and awaits an
// answer that already came gets it at once; run wait wakes when the last
// task ends.
func testRunAskWaitIsWoken(t *testing.T, s Store) {
	ctx := proctest.Ctx(t)
	r := newRun(t, s, "t1")
	reach(t, r, "t1", task.Running)
	w := r.Watch()
	defer w.Close()
	done := make(chan string, 1)
	go func() {
		done <- proctest.Spawn(t, 1, func(int) proctest.Spec {
			return proctest.Spec{Mode: "ask", Addr: s.Addr, Run: "r1", Name: "t1"}
		}, nil)[0]
	}()
	var q string
	for q == "" {
		st := of(r.TaskState()).must(t)
		if t1 := st.Tasks["t1"]; t1.Status == task.Waiting {
			q = t1.Question
			break
		}
		if err := w.Wait(ctx); err != nil {
			t.Fatalf("the asking process never asked: %v", err)
		}
	}
	send(t, r, events.KindResponse, "t1", "Use Postgres.")
	if out := <-done; strings.TrimSpace(out) != "Use Postgres." {
		t.Fatalf("ask --wait printed %q; want the response", out)
	}
	// The asker acknowledged the answer: nothing is open for it.
	if p := of(r.Pending("t1")).must(t); len(p.Messages) != 0 {
		t.Errorf("after ask --wait, t1 still has %v open", ids(p.Messages))
	}
	// A restarted worker: await returns the answer that came.
	m := of(r.Await(ctx, q)).must(t)
	if m.Body != "Use Postgres." || m.ReplyTo != q {
		t.Errorf("await = %+v", m)
	}
	// ask --wait that times out: the task goes back to running and the
	// question is closed.
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	q2, _, err := r.Ask(tctx, run.SendOptions{Task: "t1", From: "t1", Body: "Anyone?"}, true)
	if !errors.Is(err, crew.ErrTimeout) || status(t, r, "t1") != task.Running {
		t.Fatalf("ask --wait --timeout: %v, task %s; want ErrTimeout and running", err, status(t, r, "t1"))
	}
	if _, err := r.Await(ctx, q2.ID); !errors.Is(err, crew.ErrTimeout) {
		t.Errorf("await a timed-out question: %v; want ErrTimeout", err)
	}
	// run wait, in another process, wakes when the task completes.
	waited := make(chan string, 1)
	go func() {
		waited <- proctest.Spawn(t, 1, func(int) proctest.Spec {
			return proctest.Spec{Mode: "wait", Addr: s.Addr, Run: "r1", Name: "leader"}
		}, nil)[0]
	}()
	of(r.Transition(ctx, "t1", task.Complete, "t1", "", nil)).must(t)
	if out := <-waited; strings.TrimSpace(out) != "all completed" {
		t.Errorf("run wait: %q", out)
	}
}

// runHelper is the helper process of the operation-level tests, given
// by mode:
//
//	respond  wait for the barrier, respond to the task NAME's run r1 task t1; print won or lost
//	steer    wait for the barrier, send ARGS[0] steers "NAME-k" to t1; print ok
//	ask      ask for task t1, wait for the response; print its body
//	wait     block until every task of the run has ended; print "all completed"
//
// It returns the process's exit code.
func runHelper(ctx context.Context, root *run.Root, spec proctest.Spec) int {
	name := spec.Name
	switch spec.Mode {
	case "respond", "steer", "ask", "wait":
	default:
		fmt.Printf("unknown helper mode %q\n", spec.Mode)
		return 2
	}
	r, err := root.Open(spec.Run)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	proctest.AwaitBarrier(spec.Barrier)
	switch spec.Mode {
	case "respond":
		_, err := r.Send(ctx, run.SendOptions{Kind: events.KindResponse, Task: "t1", From: name, Body: "answer from " + name})
		return proctest.Outcome(err)
	case "steer":
		var n int
		fmt.Sscan(spec.Args[0], &n)
		for k := range n {
			if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: fmt.Sprintf("%s-%d", name, k)}); err != nil {
				fmt.Println(err)
				return 1
			}
		}
		fmt.Println("ok")
	case "ask":
		_, m, err := r.Ask(ctx, run.SendOptions{Task: "t1", From: name, Body: "Which DB?"}, true)
		if err == nil {
			err = r.Acknowledge(ctx, "t1", []string{m.ID}, false, "")
		}
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println(m.Body)
	case "wait":
		if err := supervise.WaitRun(ctx, r, nil); err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println("all completed")
	}
	return 0
}
