package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
)

// Watch is the request of Watch: follow the messages that arrive in a
// run, all of them or those for one agent.
type Watch struct {
	Run string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	// Agent selects the messages followed: "" every message; a task id
	// (that task's); a task's agent (all its tasks', those added while
	// watching too); the run's leader or "leader" (what workers send, and
	// tasks turning quiet or dead).
	Agent string `json:"agent,omitempty" jsonschema:"only messages to this agent: a task id, a task's agent (all its tasks), or the leader (what workers send)"`
	// Since starts after this seq; nil starts at the run's last seq: only
	// what arrives from now on.
	Since      *int64 `json:"since,omitempty" jsonschema:"start after this seq (0: every message of the run; default: only what arrives from now on)"`
	Count      int    `json:"count,omitempty" jsonschema:"stop after this many messages (default: follow until cancelled)"`
	Timeout    string `json:"timeout,omitempty" jsonschema:"give up after this duration (e.g. 10m) with class timeout, unless count messages came first"`
	NudgeAfter string `json:"nudge_after,omitempty" jsonschema:"nudge a running task whose worker shows no sign of life for this duration, once per quiet spell"`
	QuietAfter string `json:"quiet_after,omitempty" jsonschema:"a running task whose worker shows no sign of life for this duration (default 5m) is quiet"`
}

// Watched is what Watch hands its caller: a message for the watcher, or
// (the leader's watch) a task that turned quiet or dead.
type Watched struct {
	Run string
	// Task is the task concerned: the message's (for a broadcast followed
	// for an agent, the agent's receiving task), or the alert's.
	Task string
	// Message is the message; a broadcast followed for an agent is that
	// agent's copy (To: its task), as its inbox shows it.
	Message *events.Message
	// Alert, when Message is nil, is a task that turned quiet or dead
	// since it was last told of.
	Alert *TaskLiveness
}

// Watch follows the run's log from req.Since and calls fn with the
// watch's context (which ends at Timeout) and each message for the
// watcher (req.Agent), and, for the leader, each task
// turning quiet or dead (once per change); with NudgeAfter it nudges the
// tasks quiet for longer. It ends after Count messages, with ctx, at
// Timeout (crew.ErrTimeout), or with fn's error (ErrStop: nil). warn,
// when not nil, is told of a Since past the log's end, an agent with no
// task yet, and damaged places of the log (skipped). A bad agent,
// negative Count or bad duration is crew.ErrInvalid.
func (a *App) Watch(ctx context.Context, req Watch, warn func(error), fn func(context.Context, Watched) error) error {
	r, err := a.Run(req.Run)
	if err != nil {
		return err
	}
	if req.Agent != "" {
		if err := crew.ValidateID("agent", req.Agent); err != nil {
			return err
		}
	}
	if req.Count < 0 {
		return fmt.Errorf("--count must be 0 or more: %w", crew.ErrInvalid)
	}
	o, err := waitOptions(req.QuietAfter, req.NudgeAfter)
	if err != nil {
		return err
	}
	ctx, cancel, err := withTimeout(ctx, req.Timeout)
	if err != nil {
		return err
	}
	defer cancel()
	st, err := r.TaskState()
	if err != nil {
		return err
	}
	since := st.Seq // only what arrives from now on
	if req.Since != nil {
		since = *req.Since
	}
	warnPastEnd(warn, r, since, st.Seq)
	f := newWatchFilter(r.Manifest.Leader, req.Agent, st)
	if req.Agent != "" && !f.leaderSide() && len(f.tasks) == 0 && warn != nil {
		warn(fmt.Errorf("watch: run %s has no task for agent %s yet; watching for one", r.ID(), req.Agent))
	}
	cur, err := r.Events(since)
	if err != nil {
		return err
	}
	defer cur.Close()
	w := r.Watch()
	defer w.Close()
	p := &watchPoll{r: r, w: w, o: o, timeout: req.Timeout, fn: fn}
	if f.leaderSide() {
		p.last = map[string]string{}
	}
	_, err = eachEvent(cur, func() error { return p.wait(ctx) }, warn, deliver(ctx, f, req.Count, fn))
	return err
}

// waitOptions parses a watch's --quiet-after and --nudge-after.
func waitOptions(quietAfter, nudgeAfter string) (run.WaitOptions, error) {
	o := run.WaitOptions{QuietAfter: run.DefaultQuietAfter}
	var err error
	if quietAfter != "" {
		if o.QuietAfter, err = ParseDuration(quietAfter); err != nil {
			return o, err
		}
	}
	if nudgeAfter != "" {
		if o.NudgeAfter, err = ParseDuration(nudgeAfter); err != nil {
			return o, err
		}
	}
	return o, nil
}

// withTimeout derives a context from a timeout, if given.
func withTimeout(ctx context.Context, timeout string) (context.Context, context.CancelFunc, error) {
	if timeout == "" {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, cancel, nil
	}
	d, err := ParseDuration(timeout)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	return ctx, cancel, nil
}

// deliver returns Watch's callback for eachEvent: it hands fn each
// message that f matches, and ends the watch after count of them (0: no
// end).
func deliver(ctx context.Context, f *watchFilter, count int, fn func(context.Context, Watched) error) func(*events.Event) error {
	seen := 0
	return func(ev *events.Event) error {
		f.learn(ev)
		taskID, ok := f.match(ev)
		if !ok {
			return nil
		}
		m := *ev.Message
		if m.To == events.Broadcast && f.agent != "" {
			m.To = taskID // this agent's copy, as its inbox shows it
		}
		seen++
		if err := fn(ctx, Watched{Run: m.Run, Task: taskID, Message: &m}); err != nil {
			return err
		}
		if seen == count {
			return ErrStop
		}
		return nil
	}
}

// watchPoll is Watch's wait at the end of the log.
type watchPoll struct {
	r       *run.Run
	w       store.Waiter
	o       run.WaitOptions
	timeout string
	fn      func(context.Context, Watched) error
	last    map[string]string // the leader's watch: task id -> liveness state last told
}

// wait waits for the log to grow. With NudgeAfter, or for the leader, it
// waits a second at most, then nudges the tasks that are quiet for
// longer (run.NudgeQuiet), and tells the leader of tasks that turned
// quiet or dead.
func (p *watchPoll) wait(ctx context.Context) error {
	if p.o.NudgeAfter <= 0 && p.last == nil {
		return p.timedOut(p.w.Wait(ctx))
	}
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	p.w.Wait(wctx)
	if err := ctx.Err(); err != nil {
		return p.timedOut(err)
	}
	st, live, err := p.r.TasksAlive(ctx, p.o.QuietAfter)
	if err != nil {
		return err
	}
	if p.last != nil {
		if err := p.alert(ctx, st, live); err != nil {
			return err
		}
	}
	_, err = p.r.NudgeQuiet(ctx, st, live, p.o.NudgeAfter)
	return err
}

// timedOut is err, or Watch's crew.ErrTimeout when it is the timeout's.
func (p *watchPoll) timedOut(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("watch: no more messages within --timeout %s: %w", p.timeout, crew.ErrTimeout)
	}
	return err
}

// alert hands fn each task of st that has turned quiet or dead since the
// last call.
func (p *watchPoll) alert(ctx context.Context, st *state.State, live map[string]*run.Liveness) error {
	for _, t := range st.TaskList() {
		now := ""
		if l := live[t.ID]; l != nil {
			now = l.State
		}
		before := p.last[t.ID]
		p.last[t.ID] = now
		if now == before || (now != run.LiveQuiet && now != run.LiveDead) {
			continue
		}
		if err := p.fn(ctx, Watched{Run: st.Run, Task: t.ID, Alert: &TaskLiveness{Kind: now, Liveness: live[t.ID], Task: t}}); err != nil {
			return err
		}
	}
	return nil
}

// watchFilter selects the messages a watch for an agent follows: the
// routing of crew watch --agent.
type watchFilter struct {
	leader string          // the run's leader agent
	agent  string          // "" follows every message
	tasks  map[string]bool // the tasks agent stands for: its own id, or the tasks whose agent it is
}

func newWatchFilter(leader, agent string, st *state.State) *watchFilter {
	f := &watchFilter{leader: leader, agent: agent, tasks: map[string]bool{}}
	for _, t := range st.Tasks {
		if t.ID == agent || t.Agent == agent {
			f.tasks[t.ID] = true
		}
	}
	return f
}

// leaderSide reports whether the agent followed is the leader.
func (f *watchFilter) leaderSide() bool {
	return f.agent == f.leader || f.agent == run.Leader
}

// learn notes tasks added to the run while watching.
func (f *watchFilter) learn(e *events.Event) {
	if e.Type != events.TaskCreated || f.agent == "" {
		return
	}
	var spec state.TaskSpec
	json.Unmarshal(e.Data, &spec)
	if e.Task == f.agent || spec.Agent == f.agent {
		f.tasks[e.Task] = true
	}
}

// match reports whether event e carries a message for the followed agent,
// and the task it concerns (for a broadcast followed for an agent, the
// agent's receiving task; otherwise the message's task).
func (f *watchFilter) match(e *events.Event) (string, bool) {
	m := e.Message
	switch {
	case m == nil:
		return "", false
	case f.agent == "":
		return m.Task, true
	case m.Direction == events.Outbox:
		return m.Task, f.leaderSide()
	}
	for _, t := range state.Recipients(e) {
		if f.tasks[t] {
			return t, true
		}
	}
	return "", false
}
