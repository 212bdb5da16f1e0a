package app_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// newApp makes a state root with run r1 and tasks t1 and t2 (agent
// builder) and t3 (agent t3), and returns an App over it acting for id.
func newApp(t *testing.T, id app.Identity) *app.App {
	t.Helper()
	dir := t.TempDir()
	root, err := run.Init(dir, crew.PrivatePerm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	r, err := root.Create(run.CreateOptions{ID: "r1", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range [][2]string{{"t1", "builder"}, {"t2", "builder"}, {"t3", "t3"}} {
		if _, err := r.AddTask(context.Background(), task[0], state.TaskSpec{Agent: task[1]}, "leader"); err != nil {
			t.Fatal(err)
		}
	}
	return app.New(func() (*run.Root, error) { return root, nil }, id)
}

// as is an App over a's root acting for id.
func as(a *app.App, id app.Identity) *app.App { return app.New(a.Root, id) }

// reader returns a function that reads a mailbox just opened, once.
func reader(t *testing.T) func(*app.Mailbox, error) []events.Message {
	return func(mb *app.Mailbox, err error) []events.Message {
		t.Helper()
		return readAll(t, mb, err)
	}
}

func readAll(t *testing.T, mb *app.Mailbox, err error) []events.Message {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	var msgs []events.Message
	if _, err := mb.Read(context.Background(), func(m *events.Message) error {
		msgs = append(msgs, *m)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// A worker's inbox is its task's: the request's task, else the
// identity's; with neither it is refused, not taken for the leader's.
func TestInboxIdentity(t *testing.T) {
	ctx := context.Background()
	lead, read := newApp(t, app.Identity{}), reader(t)
	if _, err := lead.Steer(ctx, app.ToWorker{Task: "t1", Body: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := lead.Inbox(app.Read{}, nil); !errors.Is(err, crew.ErrInvalid) {
		t.Fatalf("inbox without a task: %v, want invalid", err)
	}
	if msgs := read(as(lead, app.Identity{Task: "t1"}).Inbox(app.Read{Peek: true}, nil)); len(msgs) != 1 || msgs[0].Body != "s1" {
		t.Fatalf("t1's inbox: %+v", msgs)
	}
	if msgs := read(as(lead, app.Identity{Task: "t1"}).Inbox(app.Read{Task: "t2"}, nil)); len(msgs) != 0 {
		t.Fatalf("t2's inbox, asked for by t1's app: %+v", msgs)
	}
	// Peek marked nothing delivered; a read does, once.
	w1 := as(lead, app.Identity{Task: "t1"})
	if msgs := read(w1.Inbox(app.Read{Unread: true}, nil)); len(msgs) != 1 || msgs[0].Status != events.StatusDelivered {
		t.Fatalf("t1's unread: %+v", msgs)
	}
	if msgs := read(w1.Inbox(app.Read{Unread: true}, nil)); len(msgs) != 0 {
		t.Fatalf("t1's unread after reading: %+v", msgs)
	}
}

// Pending, ack and reject act for the identity's task, else for the
// leader.
func TestPendingAndAckIdentity(t *testing.T) {
	ctx := context.Background()
	lead := newApp(t, app.Identity{})
	w1 := as(lead, app.Identity{Task: "t1"})
	steer, err := lead.Steer(ctx, app.ToWorker{Task: "t1", Body: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := w1.Report(ctx, app.Report{Body: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(o *app.Open, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range o.Messages {
			out = append(out, m.ID)
		}
		return out
	}
	if got := ids(lead.Pending(ctx, app.Pending{})); !slices.Equal(got, []string{rep.ID}) {
		t.Fatalf("the leader's pending: %v, want the report %s", got, rep.ID)
	}
	if got := ids(w1.Pending(ctx, app.Pending{})); !slices.Equal(got, []string{steer.ID}) {
		t.Fatalf("t1's pending: %v, want the steer %s", got, steer.ID)
	}
	// The leader cannot acknowledge t1's steer: it is not the leader's.
	if _, err := lead.Ack(ctx, app.Ack{IDs: []string{steer.ID}}); !errors.Is(err, crew.ErrConflict) {
		t.Fatalf("the leader acknowledging t1's steer: %v, want conflict", err)
	}
	if done, err := w1.Ack(ctx, app.Ack{IDs: []string{steer.ID}}); err != nil || !slices.Equal(done.Acknowledged, []string{steer.ID}) {
		t.Fatalf("t1 acknowledging its steer: %+v, %v", done, err)
	}
	if _, err := lead.Reject(ctx, app.Reject{ID: rep.ID, Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	if got := ids(lead.Pending(ctx, app.Pending{})); len(got) != 0 {
		t.Fatalf("the leader's pending after rejecting: %v", got)
	}
}

// Watch's routing: an agent follows every task whose agent it is (and
// gets its own copy of a broadcast), the leader what workers send.
func TestWatchRouting(t *testing.T) {
	ctx := context.Background()
	lead := newApp(t, app.Identity{})
	send := func(task, body string) {
		if _, err := lead.Steer(ctx, app.ToWorker{Task: task, Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	send("t1", "to t1")
	send("t3", "to t3")
	send("t2", "to t2")
	if _, err := lead.Broadcast(ctx, app.Broadcast{Body: "all"}); err != nil {
		t.Fatal(err)
	}
	if _, err := as(lead, app.Identity{Task: "t3"}).Report(ctx, app.Report{Body: "from t3"}); err != nil {
		t.Fatal(err)
	}
	watch := func(agent string, count int) []string {
		t.Helper()
		var got []string
		zero := int64(0)
		err := lead.Watch(ctx, app.Watch{Agent: agent, Since: &zero, Count: count}, nil, func(_ context.Context, w app.Watched) error {
			got = append(got, w.Task+" "+w.Message.To+" "+w.Message.Body)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got, want := watch("builder", 3), []string{"t1 t1 to t1", "t2 t2 to t2", "t1 t1 all"}; !slices.Equal(got, want) {
		t.Fatalf("builder's watch:\n%q\nwant\n%q", got, want)
	}
	if got, want := watch("t3", 2), []string{"t3 t3 to t3", "t3 t3 all"}; !slices.Equal(got, want) {
		t.Fatalf("t3's watch:\n%q\nwant\n%q", got, want)
	}
	if got := watch("leader", 1); len(got) != 1 || got[0] != "t3 leader from t3" {
		t.Fatalf("the leader's watch: %q", got)
	}
}

// A task that fails and a question that times out without a default are
// open for the leader (crew_pending, crew pending, crew://pending all
// read Pending) as messages from crew, failures first (priority high),
// until the leader acknowledges them; a worker's pending does not have
// them, and no agent may send one.
func TestPendingTellsTheLeader(t *testing.T) {
	ctx := context.Background()
	lead := newApp(t, app.Identity{})
	r, err := lead.Run("")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"t1", "t2"} {
		if _, err := r.Transition(ctx, id, task.Start, id, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	wait, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	q, _, err := r.Ask(wait, run.SendOptions{Task: "t2", From: "builder", Body: "Which DB?"}, true)
	if !errors.Is(err, crew.ErrTimeout) {
		t.Fatalf("ask --wait past its timeout: %v, want timeout", err)
	}
	if _, err := r.Transition(ctx, "t1", task.Fail, "leader", "tests do not build", nil); err != nil {
		t.Fatal(err)
	}
	open, err := lead.Pending(ctx, app.Pending{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range open.Messages {
		got = append(got, strings.Join([]string{m.Kind, m.Task, m.From, m.To, m.Priority, m.Direction}, " ")+": "+m.Body)
	}
	want := []string{
		"failure t1 crew leader high outbox: task t1 failed: tests do not build",
		"timeout t2 crew leader normal outbox: question " + q.ID + " of task t2 timed out unanswered; its worker went on without an answer. It asked:\nWhich DB?",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the leader's pending:\n%q\nwant\n%q", got, want)
	}
	if mine, err := as(lead, app.Identity{Task: "t1"}).Pending(ctx, app.Pending{}); err != nil || len(mine.Messages) != 0 {
		t.Fatalf("t1's pending: %+v, %v; want nothing", mine, err)
	}
	if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindFailure, Task: "t2", From: "builder", Body: "I failed"}); !errors.Is(err, crew.ErrInvalid) {
		t.Fatalf("a worker sending a failure: %v, want invalid", err)
	}
	ids := []string{open.Messages[0].ID, open.Messages[1].ID}
	if _, err := lead.Ack(ctx, app.Ack{IDs: ids}); err != nil {
		t.Fatal(err)
	}
	if open, err := lead.Pending(ctx, app.Pending{}); err != nil || len(open.Messages) != 0 {
		t.Fatalf("the leader's pending after ack: %+v, %v", open, err)
	}
}
