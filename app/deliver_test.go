package app_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// newWorker returns an App acting for task t1 (started) of run r1 in a
// fresh state root, and the run.
func newWorker(t *testing.T) (*app.App, *run.Run) {
	t.Helper()
	root, err := run.Init(t.TempDir(), crew.PrivatePerm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	r, err := root.Create(run.CreateOptions{ID: "r1", Title: "fix Reverse"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := r.AddTask(ctx, "t1", state.TaskSpec{Agent: "w1", Title: "runes"}, "leader"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Transition(ctx, "t1", task.Start, "w1", "", nil); err != nil {
		t.Fatal(err)
	}
	return app.New(func() (*run.Root, error) { return root, nil }, app.Identity{Run: "r1", Task: "t1"}), r
}

// TestDeliverStopCount: a flood of follow-ups blocks no more than
// MaxStopBlocks stops in a row; the count is the session's, kept in the
// run's workers/t1.stops, and a stop that is not a continued one starts
// it again.
func TestDeliverStopCount(t *testing.T) {
	a, r := newWorker(t)
	ctx := context.Background()
	leader := app.New(a.Root, app.Identity{Run: "r1"})
	stop := func(session string, active bool) *app.Delivery {
		t.Helper()
		if _, err := leader.FollowUp(ctx, app.ToWorker{Task: "t1", Body: "one more thing"}); err != nil {
			t.Fatal(err)
		}
		d, err := a.Deliver(ctx, app.Deliver{Moment: app.AtStop, Session: session, StopActive: active})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for i := 0; i < app.MaxStopBlocks; i++ {
		if d := stop("s1", i > 0); !d.Block || len(d.Delivered) != 1 || !strings.Contains(d.Text, d.Delivered[0]) {
			t.Fatalf("stop %d: %+v, want blocked by the follow-up", i+1, d)
		}
	}
	if n, err := r.StopBlocks("t1", "s1"); err != nil || n != app.MaxStopBlocks {
		t.Fatalf("StopBlocks = %d, %v; want %d", n, err, app.MaxStopBlocks)
	}
	if n, err := r.StopBlocks("t1", "s2"); err != nil || n != 0 {
		t.Fatalf("another session's StopBlocks = %d, %v; want 0", n, err)
	}
	if d := stop("s1", true); d.Block {
		t.Fatalf("stop %d in a row blocked: %+v", app.MaxStopBlocks+1, d)
	}
	path := filepath.Join(r.Dir(), "workers", "t1.stops")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the count is kept after the agent was let stop: %v", err)
	}
	if d := stop("s1", false); !d.Block {
		t.Fatalf("a new turn's stop: %+v, want blocked", d)
	}
	// A count that cannot be read is an error, not a guess; the next
	// stop of a new turn starts again.
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Deliver(ctx, app.Deliver{Moment: app.AtStop, Session: "s1", StopActive: true}); !errors.Is(err, crew.ErrDamaged) {
		t.Fatalf("a damaged count: %v, want crew.ErrDamaged", err)
	}
	if d := stop("s1", false); !d.Block {
		t.Fatalf("after a damaged count, a new turn's stop: %+v, want blocked", d)
	}
}

// TestDeliverNoTask: an agent that is no crew worker is delivered
// nothing, and no state root is looked for.
func TestDeliverNoTask(t *testing.T) {
	a := app.New(func() (*run.Root, error) { return nil, errors.New("no root should be opened") }, app.Identity{})
	for _, m := range []app.Moment{app.AtSessionStart, app.AtToolResult, app.AtStop, app.AtPrompt, app.AtModelRequest} {
		d, err := a.Deliver(context.Background(), app.Deliver{Moment: m})
		if err != nil || d.Text != "" || d.Block || d.Moment != m {
			t.Fatalf("%s without a task: %+v, %v", m, d, err)
		}
	}
	if _, err := a.Deliver(context.Background(), app.Deliver{Moment: "later"}); !errors.Is(err, crew.ErrInvalid) {
		t.Fatalf("unknown moment: %v, want crew.ErrInvalid", err)
	}
	// A session id over MaxSession made a stop count crew could not read
	// back (the breaker's finding): refused.
	if _, err := a.Deliver(context.Background(), app.Deliver{Moment: app.AtStop, Session: strings.Repeat("s", app.MaxSession+1)}); !errors.Is(err, crew.ErrInvalid) {
		t.Fatalf("session id of %d bytes: %v, want crew.ErrInvalid", app.MaxSession+1, err)
	}
}

// TestDeliverToLeader: an agent with no task whose identity is the run's
// leader is shown, at each moment, what is open for it: a worker's
// question at the next tool result (once: it is then delivered), in the
// brief, and at a stop, which the open question blocks once per turn;
// an agent with no task that is not the leader gets nothing.
func TestDeliverToLeader(t *testing.T) {
	w, r := newWorker(t)
	ctx := context.Background()
	leader := app.New(w.Root, app.Identity{Run: "r1", As: "leader"})
	deliver := func(a *app.App, at app.Moment, active bool) *app.Delivery {
		t.Helper()
		d, err := a.Deliver(ctx, app.Deliver{Moment: at, Session: "s1", StopActive: active})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := deliver(leader, app.AtToolResult, false); d.Text != "" {
		t.Fatalf("nothing open: the leader was shown %q", d.Text)
	}
	q, err := w.Ask(ctx, app.Ask{Question: "Postgres or SQLite?"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := deliver(leader, app.AtToolResult, false)
	if !strings.Contains(d.Text, "Postgres or SQLite?") || len(d.Delivered) != 1 || d.Delivered[0] != q.ID {
		t.Fatalf("after a worker asked, the leader's tool result shows %q, delivered %v; want the question, delivered", d.Text, d.Delivered)
	}
	if d := deliver(leader, app.AtToolResult, false); d.Text != "" {
		t.Fatalf("a question shown once is shown again at the next tool result: %q", d.Text)
	}
	if d := deliver(leader, app.AtSessionStart, false); !strings.Contains(d.Text, "leader of run r1") || !strings.Contains(d.Text, "Postgres or SQLite?") || !strings.Contains(d.Text, "t1 [waiting]") {
		t.Fatalf("the leader's brief: %q; want the run, its tasks and the open question", d.Text)
	}
	if d := deliver(leader, app.AtStop, false); !d.Block || !strings.Contains(d.Text, "crew respond") {
		t.Fatalf("a stop with a worker waiting: %+v; want it blocked once", d)
	}
	if d := deliver(leader, app.AtStop, true); d.Block {
		t.Fatalf("a continued stop was blocked again for a question already shown: %+v", d)
	}
	if _, err := leader.Respond(ctx, app.ToWorker{Task: "t1", Body: "SQLite"}); err != nil {
		t.Fatal(err)
	}
	if d := deliver(leader, app.AtStop, false); d.Block {
		t.Fatalf("nothing open, the leader's stop was blocked: %+v", d)
	}
	stranger := app.New(w.Root, app.Identity{Run: "r1", As: "w1"})
	if _, err := w.Report(ctx, app.Report{Body: "half done"}); err != nil {
		t.Fatal(err)
	}
	if d := deliver(stranger, app.AtToolResult, false); d.Text != "" {
		t.Fatalf("an agent that is no leader and has no task was shown %q", d.Text)
	}
	if st, _ := r.State(); len(st.OpenFor(run.Leader)) != 1 {
		t.Fatalf("the report is not open for the leader after the stranger's moment")
	}
}

// TestDeliverShow: with Show, a delivery is handed over before it is
// recorded; Show's error records nothing, so the next moment delivers
// the same messages again, and a Show that succeeds marks them.
func TestDeliverShow(t *testing.T) {
	a, _ := newWorker(t)
	ctx := context.Background()
	leader := app.New(a.Root, app.Identity{Run: "r1"})
	m, err := leader.Steer(ctx, app.ToWorker{Task: "t1", Body: "use the v2 API"})
	if err != nil {
		t.Fatal(err)
	}
	lost := errors.New("connection closed")
	var shown []string
	show := func(fail error) func(*app.Delivery) error {
		return func(d *app.Delivery) error {
			if len(d.Delivered) != 0 {
				t.Errorf("Show was given a delivery already recorded: %v", d.Delivered)
			}
			shown = append(shown, d.Text)
			return fail
		}
	}
	if _, err := a.Deliver(ctx, app.Deliver{Moment: app.AtToolResult, Show: show(lost)}); !errors.Is(err, lost) {
		t.Fatalf("Deliver with a failing Show: %v, want its error", err)
	}
	d, err := a.Deliver(ctx, app.Deliver{Moment: app.AtToolResult, Show: show(nil)})
	if err != nil || len(d.Delivered) != 1 || d.Delivered[0] != m.ID {
		t.Fatalf("the next moment: %+v, %v; want the steer delivered", d, err)
	}
	if len(shown) != 2 || !strings.Contains(shown[0], "use the v2 API") || shown[0] != shown[1] {
		t.Fatalf("shown %q; want the steer twice, the same", shown)
	}
	if d, err := a.Deliver(ctx, app.Deliver{Moment: app.AtToolResult, Show: show(nil)}); err != nil || d.Text != "" || len(shown) != 3 {
		t.Fatalf("after it was recorded: %+v, %v (Show called %d times); want nothing, Show called once more", d, err, len(shown))
	}
}

// TestDeliverWokenPrompt: a prompt that is the agent's wake in the
// middle of its turn (Woken) shows a steer but holds a follow-up for the
// stop; a person's prompt shows the follow-up.
func TestDeliverWokenPrompt(t *testing.T) {
	a, _ := newWorker(t)
	ctx := context.Background()
	leader := app.New(a.Root, app.Identity{Run: "r1"})
	if _, err := leader.Steer(ctx, app.ToWorker{Task: "t1", Body: "use the v2 API"}); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.FollowUp(ctx, app.ToWorker{Task: "t1", Body: "then run gofmt"}); err != nil {
		t.Fatal(err)
	}
	d, err := a.Deliver(ctx, app.Deliver{Moment: app.AtPrompt, Session: "s1", Woken: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Text, "use the v2 API") || strings.Contains(d.Text, "then run gofmt") {
		t.Fatalf("a woken prompt shows %q; want the steer, not the follow-up", d.Text)
	}
	if d, err = a.Deliver(ctx, app.Deliver{Moment: app.AtStop, Session: "s1"}); err != nil || !d.Block || !strings.Contains(d.Text, "then run gofmt") {
		t.Fatalf("the stop after a woken prompt: %+v, %v; want it blocked by the follow-up", d, err)
	}
	if _, err := leader.FollowUp(ctx, app.ToWorker{Task: "t1", Body: "and vet"}); err != nil {
		t.Fatal(err)
	}
	if d, err = a.Deliver(ctx, app.Deliver{Moment: app.AtPrompt, Session: "s1"}); err != nil || !strings.Contains(d.Text, "and vet") {
		t.Fatalf("a person's prompt shows %+v, %v; want the follow-up", d, err)
	}
}

// TestWakeInTurn: in the middle of a turn (a person's prompt began it)
// a follow-up does not wake the agent: the turn's stop shows it; once
// the turn ended, a follow-up wakes it.
func TestWakeInTurn(t *testing.T) {
	a, _ := newWorker(t)
	ctx := context.Background()
	leader := app.New(a.Root, app.Identity{Run: "r1"})
	if _, err := a.Deliver(ctx, app.Deliver{Moment: app.AtPrompt, Session: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.FollowUp(ctx, app.ToWorker{Task: "t1", Body: "then run gofmt"}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	d, err := a.Wake(wctx, app.Wake{}, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("in a turn, a follow-up woke the agent: %+v, %v", d, err)
	}
	if d, err := a.Deliver(ctx, app.Deliver{Moment: app.AtStop, Session: "s1"}); err != nil || !d.Block || !strings.Contains(d.Text, "then run gofmt") {
		t.Fatalf("the turn's stop: %+v, %v; want it blocked by the follow-up", d, err)
	}
	if d, err := a.Deliver(ctx, app.Deliver{Moment: app.AtStop, Session: "s1", StopActive: true}); err != nil || d.Block {
		t.Fatalf("the second stop: %+v, %v; want it allowed", d, err)
	}
	if _, err := leader.FollowUp(ctx, app.ToWorker{Task: "t1", Body: "and vet"}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if d, err := a.Wake(wctx, app.Wake{}, nil); err != nil || !strings.Contains(d.Text, "and vet") {
		t.Fatalf("after the turn, a follow-up did not wake the agent: %+v, %v", d, err)
	}
}

// TestDeliverModelRequest: at a model request the brief comes back when
// the request's text does not show it (the agent compressed its
// history), and nothing when it does; it records nothing, so a steer in
// it is still delivered at the next tool result; the leader's too.
func TestDeliverModelRequest(t *testing.T) {
	w, _ := newWorker(t)
	ctx := context.Background()
	brief, err := w.Deliver(ctx, app.Deliver{Moment: app.AtSessionStart})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := w.Deliver(ctx, app.Deliver{Moment: app.AtModelRequest, Shown: "summary\n" + brief.Text + "\nmore"}); err != nil || d.Text != "" {
		t.Fatalf("a request showing the brief got %q, %v; want nothing", d.Text, err)
	}
	leader := app.New(w.Root, app.Identity{Run: "r1", As: "leader"})
	if _, err := leader.Steer(ctx, app.ToWorker{Task: "t1", Body: "use runes"}); err != nil {
		t.Fatal(err)
	}
	d, err := w.Deliver(ctx, app.Deliver{Moment: app.AtModelRequest, Shown: "<state_snapshot>compressed</state_snapshot>"})
	if err != nil || !strings.HasPrefix(d.Text, "You are a crew worker: run r1") || len(d.Delivered) != 0 {
		t.Fatalf("a request without the brief got %q (delivered %v), %v; want the brief, nothing recorded", d.Text, d.Delivered, err)
	}
	if d, err := w.Deliver(ctx, app.Deliver{Moment: app.AtToolResult}); err != nil || !strings.Contains(d.Text, "use runes") {
		t.Fatalf("the steer after a model request's brief: %q, %v; want it delivered at the tool result", d.Text, err)
	}
	if d, err := leader.Deliver(ctx, app.Deliver{Moment: app.AtModelRequest}); err != nil || !strings.HasPrefix(d.Text, "You are the crew leader of run r1") {
		t.Fatalf("the leader's request without its brief got %q, %v", d.Text, err)
	}
	if d, err := leader.Deliver(ctx, app.Deliver{Moment: app.AtModelRequest, Shown: "x You are the crew leader of run r1, as leader."}); err != nil || d.Text != "" {
		t.Fatalf("the leader's request showing its brief got %q, %v", d.Text, err)
	}
}

// At a model request, another run's brief whose id begins with this
// run's (r10's for r1) is not this run's brief: it comes back.
func TestDeliverModelRequestAnotherRunsBrief(t *testing.T) {
	w, _ := newWorker(t)
	ctx := context.Background()
	d, err := w.Deliver(ctx, app.Deliver{Moment: app.AtModelRequest, Shown: "<state_snapshot>You are a crew worker: run r10 (other), task t1.</state_snapshot>"})
	if err != nil || !strings.HasPrefix(d.Text, "You are a crew worker: run r1 ") {
		t.Fatalf("a request showing run r10's brief got %q, %v; want r1's brief", d.Text, err)
	}
	leader := app.New(w.Root, app.Identity{Run: "r1", As: "leader"})
	if d, err := leader.Deliver(ctx, app.Deliver{Moment: app.AtModelRequest, Shown: "You are the crew leader of run r1_b."}); err != nil || !strings.HasPrefix(d.Text, "You are the crew leader of run r1 ") {
		t.Fatalf("the leader's request showing run r1_b's brief got %q, %v; want r1's brief", d.Text, err)
	}
}

// TestDeliverUnknownTaskMakesNoHeartbeat: the hook of an agent whose task
// is not in the run (a mistyped CREW_TASK) fails at every moment and
// leaves no heartbeat file, so that crew heartbeat, which trusts a file
// to be a task's, still says the task is not there; the hook of a task
// that is there makes it.
func TestDeliverUnknownTaskMakesNoHeartbeat(t *testing.T) {
	a, r := newWorker(t)
	ctx := context.Background()
	typo := app.New(a.Root, app.Identity{Run: "r1", Task: "t1x"})
	for _, m := range []app.Moment{app.AtSessionStart, app.AtToolResult, app.AtStop, app.AtPrompt} {
		if _, err := typo.Deliver(ctx, app.Deliver{Moment: m}); !errors.Is(err, crew.ErrNotFound) {
			t.Fatalf("%s for task t1x: %v, want not found", m, err)
		}
	}
	if _, err := os.Stat(filepath.Join(r.Dir(), "workers", "t1x.alive")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the hook of an unknown task made its heartbeat file: %v", err)
	}
	if _, err := typo.Heartbeat(ctx, app.Heartbeat{}); !errors.Is(err, crew.ErrNotFound) {
		t.Fatalf("crew heartbeat of task t1x after its hook: %v, want not found", err)
	}
	if _, err := a.Deliver(ctx, app.Deliver{Moment: app.AtToolResult}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.Dir(), "workers", "t1.alive")); err != nil {
		t.Fatalf("the hook of task t1 made no heartbeat file: %v", err)
	}
}
