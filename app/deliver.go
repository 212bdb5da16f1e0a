package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/supervise"
	"github.com/crew-dev/crew/task"
)

// Moment is a point of a worker agent's loop where crew delivers
// (Deliver). An agent's hooks name them in its own words: Claude Code's
// SessionStart, PostToolUse, Stop and UserPromptSubmit, Gemini CLI's
// SessionStart, AfterTool, AfterAgent, BeforeAgent and BeforeModel (cmd/crew,
// crew hook).
type Moment string

// The moments, and what each delivers (README.md, What the agent sees,
// and when).
const (
	// AtSessionStart: the session starts, resumes, was cleared or
	// compacted. The brief: the run, the task, its done-when, the
	// leader, how to use crew, and every message not yet acknowledged.
	AtSessionStart Moment = "session-start"
	// AtToolResult: a tool call ended, the next safe point. Steers,
	// nudges and broadcasts not delivered before, urgent first.
	AtToolResult Moment = "tool-result"
	// AtStop: the agent wants to end its turn. Messages not delivered
	// before (follow-ups above all) block it; see Deliver.
	AtStop Moment = "stop"
	// AtPrompt: a prompt was submitted. Everything not delivered before.
	AtPrompt Moment = "prompt"
	// AtModelRequest: the agent is about to send its model a request
	// whose text is Deliver.Shown (Gemini CLI's BeforeModel). The brief
	// (as at AtSessionStart, recorded nothing) when that text does not
	// show it, else nothing: an agent that compressed its history and
	// has no hook at that moment (Gemini CLI) gets its brief back in
	// every request after, once.
	AtModelRequest Moment = "model-request"
)

// MaxStopBlocks is how many stops in a row (Deliver.StopActive) Deliver
// blocks at the most: after that the agent may stop whatever is open.
const MaxStopBlocks = 3

// Deliver is one moment of a worker agent's loop: the request of
// Deliver.
type Deliver struct {
	Run    string `json:"run,omitempty" jsonschema:"the run id (default: the identity's, else the most recently created run)"`
	Moment Moment `json:"moment" jsonschema:"session-start, tool-result, stop, prompt or model-request"`
	// Session is the agent's session id: the count of stops in a row
	// blocked is the session's.
	Session string `json:"session,omitempty" jsonschema:"the agent's session id"`
	// StopActive, at AtStop, says that a stop was blocked before in this
	// turn (Claude Code's stop_hook_active).
	StopActive bool `json:"stopActive,omitempty" jsonschema:"at stop: a stop was blocked before in this turn"`
	// Woken, at AtPrompt, says the prompt is no person's but the agent's
	// own notice of a background task in the middle of its turn (Claude
	// Code's wake by crew hook claude wait, an asyncRewake hook, runs its
	// UserPromptSubmit hooks): it delivers as at a tool result, and
	// follow-ups wait for the turn's stop.
	Woken bool `json:"woken,omitempty" jsonschema:"at prompt: the prompt is the agent's wake in the middle of its turn, not a person's"`
	// Peek, at AtSessionStart only, returns what the moment would
	// deliver and records nothing (no delivery, no sign of life): crew
	// setup's check of the hooks it wrote.
	Peek bool `json:"peek,omitempty" jsonschema:"at session-start: show what would be delivered, record nothing"`
	// Shown, at AtModelRequest, is the text of the request the agent is
	// about to send its model.
	Shown string `json:"-"`
	Task  string `json:"-"` // the worker's task (default: the identity's; none: the leader's delivery, or nothing)
	// Tools is how the agent names crew's MCP tools in the brief, and
	// how it loads them when they are deferred (zero: crew_ask, ...).
	Tools ToolNames `json:"-"`
	// Via is how the front end reaches the agent: events.ViaHook (the
	// default: a command hook) or events.ViaHTTPHook. The delivery is
	// recorded with it and the moment ("hook:tool-result").
	Via string `json:"-"`
	// Show, when not nil, hands the delivery to the agent before it is
	// recorded: Deliver works out what the moment shows as it would,
	// calls Show once with it (also when it shows nothing), and marks the
	// messages shown delivered only once Show returned nil. An error from
	// Show marks nothing and is returned, so that a message whose answer
	// never reached the agent (crew serve's HTTP hooks: a connection
	// dropped before the answer was written) is delivered at its next
	// moment. Deliveries with Show to one participant of a run take
	// turns within the process (holdShow), so one shown but not yet
	// recorded is not shown as new again by the next (Claude Code runs
	// the hooks of parallel tool calls at once). The price is the other
	// way round across processes: a message another process's moment
	// delivers meanwhile (a command hook, crew inbox) may be shown by both.
	Show func(*Delivery) error `json:"-"`
}

// ToolNames is how an agent shows crew's MCP tools to its model: the
// prefix before each tool's name (Claude Code: mcp__crew__, its
// mcp__SERVER__TOOL), and the tool that loads tools the agent defers
// (Claude Code: ToolSearch), "" when it does not defer them.
type ToolNames struct {
	Prefix string
	Loader string
	// Crew is the crew command the brief names ("" is crew): the
	// absolute path for an agent whose shell may not find crew on its
	// PATH (Codex runs the model's commands with bash -lc, whose
	// profile resets PATH).
	Crew string
	// Timeout says the agent cuts an MCP tool call off after a timeout
	// (Codex's tool_timeout_sec): the brief says to go on waiting for an
	// answer with crew_await.
	Timeout bool
}

// name is crew's MCP tool tool as the model sees it.
func (n ToolNames) name(tool string) string { return n.Prefix + tool }

// Delivery is what a moment delivers to the agent.
type Delivery struct {
	Moment Moment `json:"moment"`
	// Text is what the model is shown: at AtStop with Block the reason
	// it may not stop (its next instruction), at the other moments
	// context added to its conversation. "" is nothing to show.
	Text string `json:"text,omitempty"`
	// Block, at AtStop only, says the agent must not end its turn.
	Block bool `json:"block,omitempty"`
	// Delivered are the ids of the messages this delivery shows that
	// were marked delivered (message.delivered) by it.
	Delivered []string `json:"delivered,omitempty"`
}

// Deliver says what the worker's agent is shown at a moment of its
// loop, and records it: the messages shown for the first time are
// marked delivered (as crew inbox marks them), so the leader sees what
// reached the agent and no moment shows them as new again. Every call is
// a sign of the worker's life (docs/concepts.md, Liveness).
//
// At AtStop, messages not delivered before (follow-ups, steers not yet
// shown; not responses) block the stop, with them as the reason; steers
// delivered but not acknowledged, and a question still open, block it
// once, with a reminder, when no stop was blocked before in the turn
// (StopActive false). No more than MaxStopBlocks stops in a row are
// blocked: the count is kept per session beside the worker's heartbeat
// (run.Run.StopBlocks), reset by every stop that is not a continued one.
//
// A request without a task (none given, none in the identity) is the
// run's leader's when the identity's agent is the leader's name
// (deliverToLeader); else the agent is no crew agent, and it delivers
// nothing and opens nothing. Errors:
// crew.ErrInvalid for an unknown moment, a bad task id or a session id
// longer than MaxSession, those of opening the run (crew.ErrNotFound)
// and the task, and I/O errors of the store and of the stop count.
func (a *App) Deliver(ctx context.Context, req Deliver) (*Delivery, error) {
	d := &Delivery{Moment: req.Moment}
	switch req.Moment {
	case AtSessionStart, AtToolResult, AtStop, AtPrompt:
	case AtModelRequest:
		req.Peek = true // the brief again: nothing new is shown
	default:
		return nil, fmt.Errorf("unknown moment %q: session-start, tool-result, stop, prompt or model-request: %w", req.Moment, crew.ErrInvalid)
	}
	if req.Peek && req.Moment != AtSessionStart && req.Moment != AtModelRequest {
		return nil, fmt.Errorf("peek is for the session-start moment only: %w", crew.ErrInvalid)
	}
	if len(req.Session) > MaxSession {
		return nil, fmt.Errorf("session id of %d bytes, more than %d: %w", len(req.Session), MaxSession, crew.ErrInvalid)
	}
	if req.Task == "" && a.Identity.Task == "" {
		return a.deliverToLeader(ctx, req, d)
	}
	id, err := a.task(req.Task)
	if err != nil {
		return nil, err
	}
	r, err := a.Run(req.Run)
	if err != nil {
		return nil, err
	}
	beat := false
	if !req.Peek {
		// A sign of life; a missing heartbeat file is made below, once
		// the task is found (supervise.Heartbeat trusts a file to be a
		// task's).
		beat = supervise.Alive(r, id, false)
		supervise.HookCalled(r, id)
	}
	defer holdShow(r, id, req)()
	w := &delivery{ctx: ctx, r: r, task: id, req: req, d: d}
	switch req.Moment {
	case AtSessionStart:
		err = w.brief()
	case AtModelRequest:
		if err = w.brief(); err == nil {
			w.unlessShown(workerBriefStart(w.r.Manifest.ID))
		}
	case AtToolResult:
		err = w.fresh(midTurn)
	case AtPrompt:
		if req.Woken {
			err = w.fresh(midTurn)
			break
		}
		// A person's prompt starts a turn: until its stop, the wait hook
		// leaves follow-ups to the stop (Wake).
		if err = r.SetInTurn(id, true); err == nil {
			err = w.fresh(func(*events.Message) bool { return true })
		}
	case AtStop:
		err = w.stop()
	}
	if err != nil {
		return nil, err
	}
	if !req.Peek && !beat {
		supervise.Alive(r, id, true)
	}
	return w.show()
}

// midTurn is what a worker is shown in the middle of its turn (at a tool
// result, and at a woken prompt): steers, nudges and broadcasts, not
// follow-ups, delivered when the turn's step ends (at its stop).
func midTurn(m *events.Message) bool {
	return m.Kind == events.KindSteer || m.Kind == events.KindNudge || m.Kind == events.KindMessage
}

// show ends a delivery made with Deliver.Show: it hands the delivery
// over, then marks what it showed delivered. Without Show it returns the
// delivery, already recorded.
func (w *delivery) show() (*Delivery, error) {
	if w.req.Show == nil {
		return w.d, nil
	}
	if err := w.req.Show(w.d); err != nil {
		return nil, err
	}
	if len(w.held) == 0 || w.req.Peek {
		return w.d, nil
	}
	e, err := w.r.MarkDeliveredVia(context.WithoutCancel(w.ctx), w.task, w.held, w.via())
	if err != nil || e == nil {
		return w.d, err
	}
	w.d.Delivered = e.MessageIDs
	return w.d, nil
}

// showing holds a lock per run directory and participant for the
// deliveries made with Deliver.Show in this process (holdShow).
var showing sync.Map // run directory + "\x00" + participant → *sync.Mutex

// holdShow waits for the turn of a delivery made with Deliver.Show to
// participant of r, and returns what ends it: such a delivery shows
// messages before it records them delivered, so another one that read
// them meanwhile would show them as new again. A delivery without Show
// (recorded first, shown after) or a Peek takes no turn.
func holdShow(r *run.Run, participant string, req Deliver) (release func()) {
	if req.Show == nil || req.Peek {
		return func() {}
	}
	mu, _ := showing.LoadOrStore(r.Dir()+"\x00"+participant, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

// deliverToLeader is Deliver for an agent with no task: the run's
// leader when the identity's agent (--as, CREW_AGENT) is its name, else
// no crew agent at all, which gets nothing and opens nothing (a Claude
// Code session in a project set up for workers, say). The leader is
// shown what is open for it, as crew pending lists it (workers'
// questions, reports, failure and timeout notices): all of it in the
// brief, what it was not shown before at a tool result or a prompt; at
// a stop, what it was not shown blocks the stop, and once per turn an
// open question does too (a worker is blocked on it), counted as a
// worker's stops are (under the reserved name leader).
func (a *App) deliverToLeader(ctx context.Context, req Deliver, d *Delivery) (*Delivery, error) {
	if a.Identity.As == "" {
		return (&delivery{req: req, d: d}).show() // not a crew agent
	}
	r, err := a.Run(req.Run)
	if err != nil {
		return nil, err
	}
	if !crew.SameID(a.Identity.As, r.Manifest.Leader) {
		return (&delivery{req: req, d: d}).show() // an agent of no task that does not lead this run
	}
	if !req.Peek {
		supervise.HookCalled(r, run.Leader)
	}
	defer holdShow(r, run.Leader, req)()
	w := &delivery{ctx: ctx, r: r, task: run.Leader, req: req, d: d}
	switch req.Moment {
	case AtSessionStart:
		err = w.leaderBrief()
	case AtModelRequest:
		if err = w.leaderBrief(); err == nil {
			w.unlessShown(leaderBriefStart(w.r.Manifest.ID))
		}
	case AtToolResult, AtPrompt:
		err = w.fresh(func(*events.Message) bool { return true })
	case AtStop:
		err = w.stop()
	}
	if err != nil {
		return nil, err
	}
	return w.show()
}

// delivery is one Deliver call for one participant.
type delivery struct {
	ctx  context.Context
	r    *run.Run
	task string // a task id, or run.Leader for the leader
	req  Deliver
	d    *Delivery
	held []string // with Deliver.Show: the ids to mark delivered once shown
}

// open returns the task and its messages not yet acknowledged, urgent
// first, then oldest first (run.Pending: nothing is marked).
func (w *delivery) open() (*state.Task, []events.Message, error) {
	p, err := w.r.Pending(w.task)
	if err != nil {
		return nil, nil, err
	}
	return p.Task, p.Messages, nil
}

// markDelivered records that the agent is shown msgs, so that no moment
// shows them as new again, lists them in the Delivery, and returns those
// of msgs this call marked: not those another moment (a concurrent
// hook, the wait hook, crew inbox) marked first, which the agent was
// shown there. With Peek it marks nothing and returns the pending ones.
// It is not cut short by ctx's end: the agent is being shown them.
func (w *delivery) markDelivered(msgs []events.Message) ([]events.Message, error) {
	var ids []string
	for _, m := range msgs {
		if m.Status == events.StatusPending {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	if w.req.Peek {
		return pendingOnly(msgs), nil
	}
	if w.req.Show != nil {
		w.held = append(w.held, ids...)
		return pendingOnly(msgs), nil
	}
	e, err := w.r.MarkDeliveredVia(context.WithoutCancel(w.ctx), w.task, ids, w.via())
	if err != nil || e == nil {
		return nil, err
	}
	w.d.Delivered = e.MessageIDs
	var marked []events.Message
	for _, m := range msgs {
		if slices.Contains(e.MessageIDs, m.ID) {
			marked = append(marked, m)
		}
	}
	return marked, nil
}

// via is how this delivery reaches the agent (events.Event.Via).
func (w *delivery) via() string {
	if w.req.Moment == AtWake {
		return events.ViaWake
	}
	via := w.req.Via
	if via == "" {
		via = events.ViaHook
	}
	return via + ":" + string(w.req.Moment)
}

func pendingOnly(msgs []events.Message) []events.Message {
	var out []events.Message
	for _, m := range msgs {
		if m.Status == events.StatusPending {
			out = append(out, m)
		}
	}
	return out
}

// workerBriefStart and leaderBriefStart are how a brief begins: what
// AtModelRequest looks for in the request's text.
func workerBriefStart(run string) string { return "You are a crew worker: run " + run }
func leaderBriefStart(run string) string { return "You are the crew leader of run " + run }

// unlessShown is AtModelRequest's rule: the brief only when the
// request's text does not show its start, the run's id whole (run r10's
// brief does not show run r1's).
func (w *delivery) unlessShown(start string) {
	for s := w.req.Shown; ; {
		i := strings.Index(s, start)
		if i < 0 {
			return
		}
		s = s[i+len(start):]
		if s == "" || !crew.IDByte(s[0]) {
			w.d.Text = ""
			return
		}
	}
}

// brief is AtSessionStart's delivery: the worker's brief, at startup and
// again after a resume, a clear or a compaction.
func (w *delivery) brief() error {
	t, msgs, err := w.open()
	if err != nil {
		return err
	}
	var b strings.Builder
	m := w.r.Manifest
	b.WriteString(workerBriefStart(m.ID))
	if m.Title != "" {
		fmt.Fprintf(&b, " (%s)", m.Title)
	}
	fmt.Fprintf(&b, ", task %s", t.ID)
	if t.Title != "" {
		fmt.Fprintf(&b, ": %s", t.Title)
	}
	fmt.Fprintf(&b, ". Status: %s. Your leader is %s.\n", t.Status, m.Leader)
	if t.DoneWhen != "" {
		fmt.Fprintf(&b, "The task is done when this command exits 0: %s\n", t.DoneWhen)
	}
	b.WriteString(workerRules(w.req.Tools))
	if t.Status == task.Waiting {
		fmt.Fprintf(&b, "You asked the leader a question (id %s) that is still open: wait for the answer with crew await %s (or %s).\n", t.Question, t.Question, w.req.Tools.name("crew_await"))
	}
	if len(msgs) > 0 {
		fmt.Fprintf(&b, "\nMessages not yet acknowledged (%d):\n%s", len(msgs), listMessages(msgs))
	}
	if _, err := w.markDelivered(msgs); err != nil {
		return err
	}
	w.d.Text = b.String()
	return nil
}

// workerRules is how a worker uses crew, in the brief, naming crew's
// MCP tools as the agent does.
func workerRules(n ToolNames) string {
	return fmt.Sprintf(`Use crew (the crew MCP tools, %s, %s, %s, ..., or the crew command): crew task start before working; act on steers from the leader before going on, follow-ups after your current step, and answer nudges with crew report; acknowledge each message once acted on (crew ack ID, with --task and your task's id where CREW_TASK is not set); when you need a decision, crew ask "..." --wait (%s with wait) and follow the answer; crew task complete when done.
`, n.name("crew_task_start"), n.name("crew_ask"), n.name("crew_ack"), n.name("crew_ask")) + crewCommand(n) + awaitAfterTimeout(n) + loadTools(n)
}

// crewCommand names the crew command by its path, for an agent whose
// shell may not have crew on its PATH.
func crewCommand(n ToolNames) string {
	if n.Crew == "" || n.Crew == "crew" {
		return ""
	}
	return fmt.Sprintf("The crew command is %s: run it by that path (your shell may not find crew on its PATH).\n", n.Crew)
}

// awaitAfterTimeout tells an agent that cuts tool calls off what to do
// when a waiting crew_ask is cut.
func awaitAfterTimeout(n ToolNames) string {
	if !n.Timeout {
		return ""
	}
	return fmt.Sprintf("If %s with wait is cut off by a tool timeout, your question stays open: call %s (or crew await ID) to go on waiting for the answer.\n", n.name("crew_ask"), n.name("crew_await"))
}

// loadTools says how to load crew's MCP tools an agent defers.
func loadTools(n ToolNames) string {
	if n.Loader == "" {
		return ""
	}
	return fmt.Sprintf("If crew's tools are not in your tool list yet, load them with %s (query: crew) before the first call.\n", n.Loader)
}

// fresh delivers the messages not delivered before that pick selects,
// urgent first, as context for the model, and marks them delivered.
func (w *delivery) fresh(pick func(*events.Message) bool) error {
	_, msgs, err := w.open()
	if err != nil {
		return err
	}
	var fresh []events.Message
	for i := range msgs {
		if msgs[i].Status == events.StatusPending && pick(&msgs[i]) {
			fresh = append(fresh, msgs[i])
		}
	}
	if fresh, err = w.markDelivered(fresh); err != nil || len(fresh) == 0 {
		return err
	}
	w.d.Text = w.freshText(fresh)
	return nil
}

// freshText is how messages not shown before are shown at a tool result,
// a prompt and a wake.
func (w *delivery) freshText(fresh []events.Message) string {
	if w.task == run.Leader {
		return fmt.Sprintf("crew: new for the leader of run %s; answer questions with crew respond TASK (%s), acknowledge reports and notices once acted on (crew ack ID):\n%s",
			w.r.ID(), w.req.Tools.name("crew_respond"), listMessages(fresh))
	}
	return fmt.Sprintf("crew: new from the leader (run %s, task %s); act on steers before going on, and acknowledge each message once acted on (crew ack --task %s ID):\n%s",
		w.r.ID(), w.task, w.task, listMessages(fresh))
}

// stop decides whether the agent may end its turn (Deliver, AtStop).
func (w *delivery) stop() error {
	active, session := w.req.StopActive, w.req.Session
	blocks := 0
	if !active {
		if err := w.r.SetStopBlocks(w.task, session, 0); err != nil {
			return err
		}
	} else {
		var err error
		if blocks, err = w.r.StopBlocks(w.task, session); err != nil {
			return err
		}
		if blocks >= MaxStopBlocks {
			return w.r.SetStopBlocks(w.task, session, 0)
		}
	}
	t, msgs, err := w.open()
	if err != nil || t != nil && t.Status.Terminal() {
		return err
	}
	if t == nil {
		return w.leaderStop(msgs, active, session, blocks)
	}
	// The turn ends here unless this stop is blocked, recorded before the
	// messages were read: a follow-up sent after the read finds the turn
	// ended and wakes the agent (Wake), one sent before is shown here.
	if err := w.r.SetInTurn(w.task, false); err != nil {
		return err
	}
	var fresh, unacked []events.Message
	for _, m := range msgs {
		switch {
		case m.Status == events.StatusPending && m.Kind != events.KindResponse:
			fresh = append(fresh, m)
		case m.Kind == events.KindSteer:
			unacked = append(unacked, m)
		}
	}
	if fresh, err = w.markDelivered(fresh); err != nil {
		return err
	}
	var reason strings.Builder
	if len(fresh) > 0 {
		fmt.Fprintf(&reason, "crew: before you stop, the leader sent you (run %s, task %s):\n%s", w.r.ID(), w.task, listMessages(fresh))
	}
	if !active {
		if len(unacked) > 0 {
			fmt.Fprintf(&reason, "crew: steers you have not acknowledged; act on them, then crew ack --task %s ID:\n%s", w.task, listMessages(unacked))
		}
		if t.Status == task.Waiting {
			fmt.Fprintf(&reason, "crew: your question %s to the leader is still open: wait for the answer with crew await %s (or %s), then go on.\n", t.Question, t.Question, w.req.Tools.name("crew_await"))
		}
	}
	return w.block(reason.String(), session, blocks)
}

// block blocks the stop with reason (none: the agent may stop), counting
// the block. The messages it shows were marked delivered before.
func (w *delivery) block(reason string, session string, blocks int) error {
	if reason == "" {
		return nil
	}
	if err := w.r.SetStopBlocks(w.task, session, blocks+1); err != nil {
		return err
	}
	if w.task != run.Leader {
		if err := w.r.SetInTurn(w.task, true); err != nil {
			return err
		}
	}
	w.d.Text, w.d.Block = reason, true
	return nil
}

// leaderStop is stop for the leader: what it was not shown blocks the
// stop; questions still open (a worker waits on each) block it once.
func (w *delivery) leaderStop(msgs []events.Message, active bool, session string, blocks int) error {
	var fresh, questions []events.Message
	for _, m := range msgs {
		switch {
		case m.Status == events.StatusPending:
			fresh = append(fresh, m)
		case m.Kind == events.KindQuestion:
			questions = append(questions, m)
		}
	}
	fresh, err := w.markDelivered(fresh)
	if err != nil {
		return err
	}
	var reason strings.Builder
	if len(fresh) > 0 {
		fmt.Fprintf(&reason, "crew: before you stop, for the leader of run %s:\n%s", w.r.ID(), listMessages(fresh))
	}
	if !active && len(questions) > 0 {
		fmt.Fprintf(&reason, "crew: workers wait on these questions; answer each with crew respond TASK (%s):\n%s", w.req.Tools.name("crew_respond"), listMessages(questions))
	}
	return w.block(reason.String(), session, blocks)
}

// leaderBrief is AtSessionStart's delivery to the leader: the run, its
// tasks, how to lead with crew, and everything open for it.
func (w *delivery) leaderBrief() error {
	_, msgs, err := w.open()
	if err != nil {
		return err
	}
	st, err := w.r.TaskState()
	if err != nil {
		return err
	}
	var b strings.Builder
	m := w.r.Manifest
	b.WriteString(leaderBriefStart(m.ID))
	if m.Title != "" {
		fmt.Fprintf(&b, " (%s)", m.Title)
	}
	fmt.Fprintf(&b, ", as %s. Tasks (%d):\n", m.Leader, len(st.Tasks))
	for _, t := range st.TaskList() {
		fmt.Fprintf(&b, "- %s [%s] %s\n", t.ID, t.Status, t.Title)
	}
	b.WriteString(leaderRules(w.req.Tools))
	if len(msgs) > 0 {
		fmt.Fprintf(&b, "\nOpen for you (%d):\n%s", len(msgs), listMessages(msgs))
	}
	if _, err := w.markDelivered(msgs); err != nil {
		return err
	}
	w.d.Text = b.String()
	return nil
}

// leaderRules is how a leader uses crew, in its brief, naming crew's
// MCP tools as the agent does.
func leaderRules(n ToolNames) string {
	return fmt.Sprintf(`Use crew (the crew MCP tools, %s, %s, %s, ..., or the crew command): answer a worker's question with crew respond TASK "..." (the worker is blocked until you do); redirect a worker with crew steer TASK "...", queue work for after its step with crew follow-up, ask a quiet one for status with crew nudge; acknowledge reports and failure notices once acted on (crew ack ID); crew pending lists what is open for you.
`, n.name("crew_respond"), n.name("crew_steer"), n.name("crew_pending")) + crewCommand(n) + loadTools(n)
}

// listMessages lists messages for the model: a header line and the body
// of each.
func listMessages(msgs []events.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "- %s from %s", m.Kind, m.From)
		if m.Priority != "" && m.Priority != events.DefaultPriority {
			fmt.Fprintf(&b, " [%s]", m.Priority)
		}
		fmt.Fprintf(&b, " (id %s): %s\n", m.ID, strings.ReplaceAll(m.Body, "\n", "\n  "))
	}
	return b.String()
}

// MaxSession is the longest session id Deliver takes, in bytes: the id
// is kept in the task's count of stops (workers/TASK.stops), and one of
// 64 KiB made a record crew could not read back. Agents' ids are UUIDs.
const MaxSession = 1024
