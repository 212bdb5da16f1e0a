package commit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
	"github.com/crew-dev/crew/store/commit"
)

// memTail is a log in memory whose writer may hold a stale state, as a
// NATS writer does: Load returns the cached state (not current) until
// the engine says it is behind.
type memTail struct {
	log      []*events.Event // the log; seq i+1 at i
	st       *state.State    // the writer's state; nil: read the log
	current  bool
	end      int64
	behinds  []bool
	appends  int
	lines    string
	projects int
	acts     []mailbox.Act
}

func newTail(t *testing.T) *memTail {
	data, _ := json.Marshal(state.Manifest{ID: "r1", Leader: "leader"})
	return &memTail{log: []*events.Event{{Seq: 1, Type: events.RunCreated, Run: "r1", Actor: "leader", Data: data}}}
}

func (m *memTail) Load(ctx context.Context, open bool) (*state.State, bool, error) {
	if m.st == nil {
		m.st, m.current = state.New(), true
		for _, e := range m.log {
			m.st.Apply(e)
		}
	}
	m.end = m.st.Seq
	return m.st, m.current, nil
}

func (m *memTail) Behind(dirty bool) { m.behinds, m.st = append(m.behinds, dirty), nil }

func (m *memTail) CatchUp(ctx context.Context, view *state.State) error {
	for _, e := range m.log[view.Seq:m.end] {
		view.Apply(e)
	}
	return nil
}

func (m *memTail) Append(ctx context.Context, last int64, evs []*events.Event, lines []byte) error {
	if last != int64(len(m.log)) {
		return fmt.Errorf("at %d, not %d: %w", len(m.log), last, crew.ErrConflict)
	}
	m.appends++
	m.log = append(m.log, evs...)
	m.lines += string(lines)
	return nil
}

func (m *memTail) Project(ctx context.Context, st *state.State, evs []*events.Event, acts []mailbox.Act) {
	m.projects++
	m.acts = append(m.acts, acts...)
}

// add is a change that creates task id (refused when refuse is set).
func add(id string, refuse error) store.Change {
	return store.Change{Validate: func(st *state.State) (*events.Event, error) {
		if refuse != nil {
			return nil, refuse
		}
		return &events.Event{Type: events.TaskCreated, Task: id, Actor: "leader", Data: json.RawMessage(`{"title":"` + id + `"}`)}, nil
	}}
}

func ops(changes ...store.Change) []*commit.Op {
	var out []*commit.Op
	for _, c := range changes {
		out = append(out, &commit.Op{Ctx: context.Background(), Change: c})
	}
	return out
}

// A batch: each operation sees those before it, a refused one takes no
// seq, the events are appended in one call and projected once.
func TestBatch(t *testing.T) {
	m := newTail(t)
	m.Load(context.Background(), false)
	no := errors.New("no")
	sees := store.Change{Validate: func(st *state.State) (*events.Event, error) {
		if st.Tasks["a"] == nil || st.Seq != 2 {
			return nil, fmt.Errorf("sees seq %d without a", st.Seq)
		}
		return nil, nil
	}}
	b := ops(add("a", nil), add("x", no), sees, add("b", nil))
	if err := (commit.Engine{Run: "r1"}).Commit(context.Background(), m, b); err != nil {
		t.Fatal(err)
	}
	if b[0].Event == nil || b[0].Event.Seq != 2 || b[0].Event.Run != "r1" || b[0].Event.At.IsZero() {
		t.Errorf("first = %+v; want seq 2, stamped", b[0].Event)
	}
	if !errors.Is(b[1].Err, no) || b[1].Event != nil || b[2].Err != nil || b[2].Event != nil {
		t.Errorf("refused = %v %v, nothing to do = %v %v", b[1].Event, b[1].Err, b[2].Event, b[2].Err)
	}
	if b[3].Event == nil || b[3].Event.Seq != 3 {
		t.Errorf("last = %+v; want seq 3 (the refused one took none)", b[3].Event)
	}
	if m.appends != 1 || strings.Count(m.lines, "\n") != 2 || m.projects != 1 || m.st.Seq != 3 || m.st.Tasks["b"] == nil {
		t.Errorf("%d appends of %q, %d projects, state at %d; want one append of two lines, applied", m.appends, m.lines, m.projects, m.st.Seq)
	}
}

// A writer whose state is behind loses the race, reads what won (its
// state clean: the lost event was never applied) and validates again.
func TestConflictValidatesAgain(t *testing.T) {
	m := newTail(t)
	m.Load(context.Background(), false)
	m.current = false
	m.log = append(m.log, &events.Event{Seq: 2, Type: events.TaskCreated, Run: "r1", Task: "other", Data: json.RawMessage(`{}`)})
	var saw []int64
	c := add("a", nil)
	v := c.Validate
	c.Validate = func(st *state.State) (*events.Event, error) { saw = append(saw, st.Seq); return v(st) }
	b := ops(c)
	if err := (commit.Engine{Run: "r1"}).Commit(context.Background(), m, b); err != nil || b[0].Err != nil {
		t.Fatal(err, b[0].Err)
	}
	if fmt.Sprint(saw) != "[1 2]" || b[0].Event.Seq != 3 || fmt.Sprint(m.behinds) != "[false]" {
		t.Errorf("validated at %v, committed seq %d, behind %v; want [1 2], 3, [false]", saw, b[0].Event.Seq, m.behinds)
	}
}

// A refusal met on a state that may be behind is checked on a current
// one; one met on a current state is final.
func TestRefusalOnStaleStateIsChecked(t *testing.T) {
	m := newTail(t)
	m.Load(context.Background(), false)
	m.current = false
	m.log = append(m.log, &events.Event{Seq: 2, Type: events.TaskCreated, Run: "r1", Task: "t1", Data: json.RawMessage(`{}`)})
	needsT1 := store.Change{Validate: func(st *state.State) (*events.Event, error) {
		if st.Tasks["t1"] == nil {
			return nil, crew.ErrNotFound
		}
		return &events.Event{Type: events.TaskStarted, Task: "t1", From: "pending", To: "running"}, nil
	}}
	b := ops(needsT1)
	if err := (commit.Engine{Run: "r1"}).Commit(context.Background(), m, b); err != nil || b[0].Err != nil || b[0].Event.Seq != 3 {
		t.Fatalf("%v %v %+v; want committed at seq 3", err, b[0].Err, b[0].Event)
	}
	b = ops(add("z", crew.ErrConflict))
	(commit.Engine{Run: "r1"}).Commit(context.Background(), m, b)
	if !errors.Is(b[0].Err, crew.ErrConflict) || len(m.behinds) != 1 {
		t.Errorf("refused on a current state: %v, behind %v; want the refusal, not read again", b[0].Err, m.behinds)
	}
}

// A cancelled operation commits nothing.
func TestCancelled(t *testing.T) {
	m := newTail(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := []*commit.Op{{Ctx: ctx, Change: add("a", nil)}}
	(commit.Engine{Run: "r1"}).Commit(context.Background(), m, b)
	if !errors.Is(b[0].Err, context.Canceled) || m.appends != 0 {
		t.Errorf("%v, %d appends; want context.Canceled and none", b[0].Err, m.appends)
	}
}

// An event the state cannot apply is refused before it is appended, its
// seq left free; the last of a batch, applied after its append, is
// committed and the state says it is damaged.
func TestUnappliable(t *testing.T) {
	bad := store.Change{Validate: func(*state.State) (*events.Event, error) {
		return &events.Event{Type: events.TaskCreated, Task: "bad", Data: json.RawMessage(`"x"`)}, nil
	}}
	m := newTail(t)
	b := ops(bad, add("a", nil))
	(commit.Engine{Run: "r1"}).Commit(context.Background(), m, b)
	if b[0].Err == nil || b[0].Event != nil || b[1].Event == nil || b[1].Event.Seq != 2 {
		t.Errorf("bad then a: %v %v, %+v; want bad refused and a at seq 2", b[0].Event, b[0].Err, b[1].Event)
	}
	m = newTail(t)
	b = ops(bad)
	(commit.Engine{Run: "r1"}).Commit(context.Background(), m, b)
	if b[0].Event == nil || fmt.Sprint(m.behinds) != "[true]" || len(m.log) != 2 {
		t.Errorf("bad alone: %+v %v, behind %v; want committed, the state read again", b[0].Event, b[0].Err, m.behinds)
	}
}

// A view the caller read is brought up to the log's end, validated
// against, and brought past the committed event.
func TestView(t *testing.T) {
	m := newTail(t)
	view := state.For(state.Leader) // every task: a state for one task would leave a out
	view.Apply(m.log[0])
	m.log = append(m.log, &events.Event{Seq: 2, Type: events.TaskCreated, Run: "r1", Task: "t1", Data: json.RawMessage(`{}`)})
	var saw *state.State
	c := add("a", nil)
	v := c.Validate
	c.State = view
	c.Validate = func(st *state.State) (*events.Event, error) { saw = st; return v(st) }
	b := ops(c)
	if err := (commit.Engine{Run: "r1"}).Commit(context.Background(), m, b); err != nil || b[0].Err != nil {
		t.Fatal(err, b[0].Err)
	}
	if saw != view || view.Seq != 3 || view.Tasks["t1"] == nil || view.Tasks["a"] == nil {
		t.Errorf("validated against the view: %v; view at seq %d; want it, at 3 with t1 and a", saw == view, view.Seq)
	}
}
