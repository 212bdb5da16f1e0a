// crew hook claude|gemini EVENT: crew's delivery rules inside an
// agent's loop. The agent runs the command at points of its loop with a
// JSON object on standard input and reads a JSON answer on standard
// output. Claude Code's hooks reference:
// https://code.claude.com/docs/en/hooks (also
// https://docs.anthropic.com/en/docs/claude-code/hooks); Gemini CLI's:
// https://geminicli.com/docs/hooks/reference (the same shapes: both
// read hookSpecificOutput.additionalContext as text the model sees, and
// decision "block" with a reason, Gemini's alias of "deny", as "go on,
// with the reason as the next instruction"). Input fields used here:
// hook_event_name, session_id, source (SessionStart), stop_hook_active
// (Claude's Stop, Gemini's AfterAgent).

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// moment is a point of an agent's loop where crew delivers.
type moment int

const (
	atStart  moment = iota // the session starts, resumes or was compacted: the brief
	atTool                 // a tool call ended (the next safe point): steers, nudges, broadcasts
	atStop                 // the agent wants to end its turn: follow-ups block it
	atPrompt               // a prompt was submitted: everything new
)

// hookAgent is an agent whose hooks crew answers: its name on the
// command line and its event for each moment, in the order its hooks
// are listed.
type hookAgent struct {
	name, title string
	events      []hookEvent
}

type hookEvent struct {
	name string
	at   moment
}

var hookAgents = []hookAgent{
	{"claude", "Claude Code", []hookEvent{{"SessionStart", atStart}, {"PostToolUse", atTool}, {"Stop", atStop}, {"UserPromptSubmit", atPrompt}}},
	{"gemini", "Gemini CLI", []hookEvent{{"SessionStart", atStart}, {"AfterTool", atTool}, {"AfterAgent", atStop}, {"BeforeAgent", atPrompt}}},
}

// eventNames is "SessionStart, PostToolUse, Stop or UserPromptSubmit".
func (a hookAgent) eventNames(sep, last string) string {
	var names []string
	for _, ev := range a.events {
		names = append(names, ev.name)
	}
	return strings.Join(names[:len(names)-1], sep) + last + names[len(names)-1]
}

// maxStopBlocks is how many stops in a row (stop_hook_active) crew
// blocks at the most: after that the agent may stop whatever is open.
const maxStopBlocks = 3

func hookCommand() *cli.Command {
	cmd := &cli.Command{
		Name:  "hook",
		Usage: "deliver crew's messages inside an agent's loop (its hooks): crew hook claude|gemini EVENT",
		UsageText: "crew setup claude   # writes the hooks into .claude/settings.json\n" +
			"echo '{\"hook_event_name\":\"PostToolUse\"}' | CREW_RUN=r1 CREW_TASK=t1 crew hook claude PostToolUse",
	}
	for _, a := range hookAgents {
		cmd.Subcommands = append(cmd.Subcommands, &cli.Command{
			Name:      a.name,
			Usage:     a.title + " hooks (" + a.eventNames(", ", " and ") + "): the hook's JSON input on standard input, its JSON answer on standard output",
			UsageText: "CREW_RUN=r1 CREW_TASK=t1 crew hook " + a.name + " " + a.events[1].name + " < hook-input.json",
			ArgsUsage: "EVENT",
			Flags:     []cli.Flag{runFlag, taskFlag},
			Action:    func(c *cli.Context) error { return agentHook(c, a) },
		})
	}
	return cmd
}

// hookInput is the part of a hook's input crew reads.
type hookInput struct {
	HookEventName  string `json:"hook_event_name"`
	SessionID      string `json:"session_id"`
	Source         string `json:"source"`           // SessionStart: startup, resume, clear, compact
	StopHookActive bool   `json:"stop_hook_active"` // Stop, AfterAgent
}

// hookOutput is a hook's answer.
type hookOutput struct {
	Decision           string              `json:"decision,omitempty"` // Stop, AfterAgent: "block"
	Reason             string              `json:"reason,omitempty"`
	HookSpecificOutput *hookSpecificOutput `json:"hookSpecificOutput,omitempty"`
}

type hookSpecificOutput struct {
	HookEventName     string `json:"hookEventName"`
	AdditionalContext string `json:"additionalContext"`
}

// agentHook answers one hook of agent a. An agent that is no crew
// worker (no --task / CREW_TASK) gets no answer. Any failure is exit 1,
// which the agent shows and goes on from (exit 2 would block its tool
// call or stop).
func agentHook(c *cli.Context, a hookAgent) error {
	if err := answerHook(c, a); err != nil {
		return cli.Exit("hook: "+human.Escape(message(err)), exitIO)
	}
	return nil
}

func answerHook(c *cli.Context, a hookAgent) error {
	e := newEnv(c)
	if c.Args().Len() != 1 {
		return fmt.Errorf("hook %s takes one event: %s: %w", a.name, a.eventNames(", ", " or "), crew.ErrInvalid)
	}
	event := c.Args().First()
	i := slices.IndexFunc(a.events, func(ev hookEvent) bool { return ev.name == event })
	if i < 0 {
		return fmt.Errorf("unknown %s hook event %q: %s: %w", a.title, event, a.eventNames(", ", " or "), crew.ErrInvalid)
	}
	var in hookInput
	data, err := io.ReadAll(io.LimitReader(c.App.Reader, 16<<20))
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(data))) > 0 {
		if err := json.Unmarshal(data, &in); err != nil {
			return fmt.Errorf("hook input is not JSON: %v: %w", err, crew.ErrInvalid)
		}
	}
	if in.HookEventName != "" && in.HookEventName != event {
		return fmt.Errorf("hook %s got the input of %s: %w", event, in.HookEventName, crew.ErrInvalid)
	}
	if c.String("task") == "" {
		return nil // not a crew worker
	}
	r, id, err := e.worker()
	if err != nil {
		return err
	}
	r.Alive(id, true) // every hook call is a sign of the agent's life (docs/concepts.md, Liveness)
	h := &hook{ctx: c.Context, r: r, task: id, in: in}
	var out *hookOutput
	switch a.events[i].at {
	case atStart:
		out, err = h.sessionStart(event)
	case atTool:
		out, err = h.deliver(event, func(m *events.Message) bool {
			return m.Kind == events.KindSteer || m.Kind == events.KindNudge || m.Kind == events.KindMessage
		})
	case atPrompt:
		out, err = h.deliver(event, func(*events.Message) bool { return true })
	case atStop:
		out, err = h.stop()
	}
	if err != nil || out == nil {
		return err
	}
	line, err := jsonLine(out)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(line)
	return err
}

// hook is one hook call for one task.
type hook struct {
	ctx  context.Context
	r    *run.Run
	task string
	in   hookInput
}

// open returns the task and its messages not yet acknowledged, urgent
// first, then oldest first (run.Pending: nothing is marked).
func (h *hook) open() (*state.Task, []events.Message, error) {
	p, err := h.r.Pending(h.task)
	if err != nil {
		return nil, nil, err
	}
	return p.Task, p.Messages, nil
}

// markDelivered records that the agent was shown msgs (as crew inbox
// does), so that no hook shows them as new again.
func (h *hook) markDelivered(msgs []events.Message) error {
	var ids []string
	for _, m := range msgs {
		if m.Status == events.StatusPending {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := h.r.MarkDelivered(context.WithoutCancel(h.ctx), h.task, ids)
	return err
}

// sessionStart gives the agent its brief, at startup and again after a
// resume, a clear or a compaction: the run, the task, its done-when, the
// leader, and every message not yet acknowledged.
func (h *hook) sessionStart(event string) (*hookOutput, error) {
	t, msgs, err := h.open()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	m := h.r.Manifest
	fmt.Fprintf(&b, "You are a crew worker: run %s", m.ID)
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
	b.WriteString(workerRules)
	if t.Status == task.Waiting {
		fmt.Fprintf(&b, "You asked the leader a question (id %s) that is still open: wait for the answer with crew await %s (or crew_await).\n", t.Question, t.Question)
	}
	if len(msgs) > 0 {
		fmt.Fprintf(&b, "\nMessages not yet acknowledged (%d):\n%s", len(msgs), hookMessages(msgs))
	}
	if err := h.markDelivered(msgs); err != nil {
		return nil, err
	}
	return &hookOutput{HookSpecificOutput: &hookSpecificOutput{HookEventName: event, AdditionalContext: b.String()}}, nil
}

// workerRules is how a worker uses crew, in the brief.
const workerRules = `Use crew (the crew_* MCP tools, or the crew command): crew task start before working; act on steers from the leader before going on, follow-ups after your current step, and answer nudges with crew report; acknowledge each message once acted on (crew ack ID); when you need a decision, crew ask "..." --wait and follow the answer; crew task complete when done.
`

// deliver shows the messages not delivered before that pick selects,
// urgent first, as context for the model, and marks them delivered.
func (h *hook) deliver(event string, pick func(*events.Message) bool) (*hookOutput, error) {
	_, msgs, err := h.open()
	if err != nil {
		return nil, err
	}
	var fresh []events.Message
	for i := range msgs {
		if msgs[i].Status == events.StatusPending && pick(&msgs[i]) {
			fresh = append(fresh, msgs[i])
		}
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	if err := h.markDelivered(fresh); err != nil {
		return nil, err
	}
	text := fmt.Sprintf("crew: new from the leader (run %s, task %s); act on steers before going on, and acknowledge each message once acted on (crew ack ID):\n%s",
		h.r.ID(), h.task, hookMessages(fresh))
	return &hookOutput{HookSpecificOutput: &hookSpecificOutput{HookEventName: event, AdditionalContext: text}}, nil
}

// stop decides whether the agent may end its turn. Follow-ups and steers
// not delivered yet block it, with the messages as the reason (and are
// delivered); steers delivered but not acknowledged, and a question
// still open, block it once, with a reminder, when no stop hook has
// blocked before in this turn (stop_hook_active). Never more than
// maxStopBlocks stops in a row are blocked.
func (h *hook) stop() (*hookOutput, error) {
	count := stopCounter(h.in.SessionID, h.r.ID(), h.task)
	if !h.in.StopHookActive {
		count.reset()
	} else if count.get() >= maxStopBlocks {
		count.reset()
		return nil, nil
	}
	t, msgs, err := h.open()
	if err != nil {
		return nil, err
	}
	if t.Status.Terminal() {
		return nil, nil
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
	var reason strings.Builder
	if len(fresh) > 0 {
		fmt.Fprintf(&reason, "crew: before you stop, the leader sent you (run %s, task %s):\n%s", h.r.ID(), h.task, hookMessages(fresh))
	}
	if !h.in.StopHookActive {
		if len(unacked) > 0 {
			fmt.Fprintf(&reason, "crew: steers you have not acknowledged; act on them, then crew ack ID:\n%s", hookMessages(unacked))
		}
		if t.Status == task.Waiting {
			fmt.Fprintf(&reason, "crew: your question %s to the leader is still open: wait for the answer with crew await %s (or crew_await), then go on.\n", t.Question, t.Question)
		}
	}
	if reason.Len() == 0 {
		return nil, nil
	}
	if err := h.markDelivered(fresh); err != nil {
		return nil, err
	}
	count.add()
	return &hookOutput{Decision: "block", Reason: reason.String()}, nil
}

// hookMessages lists messages for the model: a header line and the body
// of each.
func hookMessages(msgs []events.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "- %s from %s", m.Kind, m.From)
		if m.Priority != "" && m.Priority != "normal" {
			fmt.Fprintf(&b, " [%s]", m.Priority)
		}
		fmt.Fprintf(&b, " (id %s): %s\n", m.ID, strings.ReplaceAll(m.Body, "\n", "\n  "))
	}
	return b.String()
}

// stopBlocks counts the stops in a row a session's hook blocked, in a
// small file in the temporary directory (stop_hook_active says only
// whether it was one or more).
type stopBlocks string

func stopCounter(session, runID, taskID string) stopBlocks {
	key := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') {
			return r
		}
		return '_'
	}, session+"."+runID+"."+taskID)
	return stopBlocks(filepath.Join(os.TempDir(), "crew-stop-"+key))
}

func (s stopBlocks) get() int {
	b, _ := os.ReadFile(string(s))
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func (s stopBlocks) add()   { os.WriteFile(string(s), []byte(strconv.Itoa(s.get()+1)), 0o600) }
func (s stopBlocks) reset() { os.Remove(string(s)) }
