// crew hook claude|gemini EVENT: crew's deliveries inside an agent's
// loop. The agent runs the command at points of its loop with a JSON
// object on standard input and reads a JSON answer on standard output.
// This file only translates: the agent's event to a moment of package
// app (app.Moment), and the delivery app.App.Deliver decides on (what to
// show, whether to block the stop) back to the agent's JSON. Claude Code's hooks reference:
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
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/internal/agentconfig"
	"github.com/crew-dev/crew/internal/human"
)

// hookAgent is an agent whose hooks crew answers: its name on the
// command line and its event for each moment (app.Moment), in the order
// its hooks are listed.
type hookAgent struct {
	name, title string
	events      []hookEvent
	// tools is how the agent names crew's MCP tools to its model.
	tools app.ToolNames
	// waitEvents are the events that arm crew hook AGENT wait (an
	// asyncRewake hook: Claude Code only): the session's start, and after
	// each wake the stop that ends the woken turn, or a prompt.
	waitEvents []string
}

type hookEvent struct {
	name string
	at   app.Moment
}

// hookAgents are the agents crew hook answers. Claude Code's events that
// are not here, on purpose (https://code.claude.com/docs/en/hooks):
// PreToolUse (context added before a tool runs would be read with the
// tool's result anyway, and a steer is better shown once the tool's
// outcome is known); SubagentStart and SubagentStop (a subagent is not
// the worker: its context is its own, and what it returns reaches the
// worker's loop, whose next tool result or stop delivers); PreCompact
// and PostCompact (SessionStart with source compact brings the brief
// back after a compaction); Notification, PermissionRequest,
// SessionEnd and the others (no context reaches the model from them).
// PostToolUseFailure is the same moment as PostToolUse: a failed tool
// call is a tool boundary too.
var hookAgents = []hookAgent{
	{"claude", "Claude Code", []hookEvent{{"SessionStart", app.AtSessionStart}, {"PostToolUse", app.AtToolResult}, {"PostToolUseFailure", app.AtToolResult}, {"Stop", app.AtStop}, {"UserPromptSubmit", app.AtPrompt}},
		app.ToolNames{Prefix: "mcp__crew__", Loader: "ToolSearch"}, []string{"SessionStart", "UserPromptSubmit", "Stop"}},
	{"gemini", "Gemini CLI", []hookEvent{{"SessionStart", app.AtSessionStart}, {"AfterTool", app.AtToolResult}, {"AfterAgent", app.AtStop}, {"BeforeAgent", app.AtPrompt}},
		app.ToolNames{}, nil},
}

// waitTimeout is the timeout, in seconds, setup gives the wait hook:
// a day, after which the agent kills it and its next stop or prompt
// arms another.
const waitTimeout = 86400

// eventNames is "SessionStart, PostToolUse, Stop or UserPromptSubmit".
func (a hookAgent) eventNames(sep, last string) string {
	var names []string
	for _, ev := range a.events {
		names = append(names, ev.name)
	}
	return strings.Join(names[:len(names)-1], sep) + last + names[len(names)-1]
}

// hooks are the crew hook commands crew setup writes for a, running
// command (agentconfig.Hooks).
func (a hookAgent) hooks(command string) agentconfig.Hooks {
	h := agentconfig.Hooks{Command: command, Agent: a.name, WaitEvents: a.waitEvents}
	if len(a.waitEvents) > 0 {
		h.WaitTimeout = waitTimeout
	}
	for _, ev := range a.events {
		h.Events = append(h.Events, ev.name)
		if ev.at == app.AtToolResult {
			h.ToolEvents = append(h.ToolEvents, ev.name)
		}
	}
	return h
}

func hookCommand() *cli.Command {
	cmd := &cli.Command{
		Name:  "hook",
		Usage: "deliver crew's messages inside an agent's loop (its hooks): crew hook claude|gemini EVENT",
		UsageText: "crew setup claude   # writes the hooks into .claude/settings.json\n" +
			"echo '{\"hook_event_name\":\"PostToolUse\"}' | CREW_RUN=r1 CREW_TASK=t1 crew hook claude PostToolUse",
	}
	for _, a := range hookAgents {
		usage := a.title + " hooks (" + a.eventNames(", ", " and ") + "): the hook's JSON input on standard input, its JSON answer on standard output"
		usageText := "CREW_RUN=r1 CREW_TASK=t1 crew hook " + a.name + " " + a.events[1].name + " < hook-input.json"
		if len(a.waitEvents) > 0 {
			usage += "; crew hook " + a.name + " wait, an asyncRewake hook, waits for the agent's mail and exits 2 with it on standard error, which wakes an idle session"
			usageText += "\nCREW_RUN=r1 CREW_TASK=t1 crew hook " + a.name + " wait < hook-input.json   # exit 2: woken, the delivery on stderr"
		}
		cmd.Subcommands = append(cmd.Subcommands, &cli.Command{
			Name:      a.name,
			Usage:     usage,
			UsageText: usageText,
			ArgsUsage: "EVENT",
			Flags: []cli.Flag{runFlag, taskFlag, asFlag,
				&cli.BoolFlag{Name: "peek", Usage: "at SessionStart: print what the hook would deliver, record nothing (crew setup's check)"},
				&cli.BoolFlag{Name: waiterFlag, Hidden: true}},
			Action: func(c *cli.Context) error { return agentHook(c, a) },
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
	err := answerHook(c, a)
	switch {
	case err == errWoken:
		return cli.Exit("", wakeExit)
	case err != nil:
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
	if event == "wait" && len(a.waitEvents) > 0 {
		var in hookInput
		if !c.Bool(waiterFlag) { // the waiter's standard input is the hook's pipe
			var err error
			if in, err = readHookInput(c); err != nil {
				return err
			}
		}
		return wait(c, e, a, in)
	}
	i := slices.IndexFunc(a.events, func(ev hookEvent) bool { return ev.name == event })
	if i < 0 {
		return fmt.Errorf("unknown %s hook event %q: %s: %w", a.title, event, a.eventNames(", ", " or "), crew.ErrInvalid)
	}
	in, err := readHookInput(c)
	if err != nil {
		return err
	}
	if in.HookEventName != "" && in.HookEventName != event {
		return fmt.Errorf("hook %s got the input of %s: %w", event, in.HookEventName, crew.ErrInvalid)
	}
	d, err := e.app().Deliver(c.Context, app.Deliver{Moment: a.events[i].at, Session: in.SessionID, StopActive: in.StopHookActive,
		Peek: c.Bool("peek"), Tools: a.tools})
	if err != nil {
		return err
	}
	out := hookAnswer(event, d)
	if out == nil {
		return nil
	}
	line, err := jsonLine(out)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(line)
	return err
}

// readHookInput reads the hook's JSON input from standard input (none:
// the zero input).
func readHookInput(c *cli.Context) (hookInput, error) {
	var in hookInput
	data, err := io.ReadAll(io.LimitReader(c.App.Reader, 16<<20))
	if err != nil {
		return in, err
	}
	if len(strings.TrimSpace(string(data))) > 0 {
		if err := json.Unmarshal(data, &in); err != nil {
			return in, fmt.Errorf("hook input is not JSON: %v: %w", err, crew.ErrInvalid)
		}
	}
	return in, nil
}

// hookAnswer is the hook's answer to event carrying delivery d: a
// blocked stop as decision "block" with the reason, text to show as
// additionalContext; nil (no answer) for nothing to show.
func hookAnswer(event string, d *app.Delivery) *hookOutput {
	switch {
	case d.Block:
		return &hookOutput{Decision: "block", Reason: d.Text}
	case d.Text != "":
		return &hookOutput{HookSpecificOutput: &hookSpecificOutput{HookEventName: event, AdditionalContext: d.Text}}
	}
	return nil
}
