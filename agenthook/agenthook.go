// Package agenthook translates an agent's hooks to crew's deliveries and
// back: the agent's event to a moment of package app (app.Moment), its
// JSON input to an app.Deliver request, and the delivery app.App.Deliver
// decides on (what to show, whether to block the stop) to the agent's
// JSON answer. One translation for both doors an agent's hooks come in
// by: crew hook AGENT EVENT, a command hook (cmd/crew), and crew serve's
// HTTP hooks (package web), so that both answer and record alike. It
// links no HTTP server: the lite build (cmd/crew, -tags crew_lite) runs
// crew hook without one.
//
// Claude Code's hooks reference: https://code.claude.com/docs/en/hooks
// (also https://docs.anthropic.com/en/docs/claude-code/hooks); Gemini
// CLI's: https://geminicli.com/docs/hooks/reference (the same shapes:
// both read hookSpecificOutput.additionalContext as text the model sees,
// and decision "block" with a reason, Gemini's alias of "deny", as "go
// on, with the reason as the next instruction"). Input fields used here:
// hook_event_name, session_id, source (SessionStart), stop_hook_active
// (Claude's Stop, Gemini's AfterAgent), prompt (UserPromptSubmit: a wake
// in the middle of a turn is no person's prompt, Input.Woken),
// llm_request (Gemini's BeforeModel: the request's text, to which the
// answer's hookSpecificOutput.llm_request adds the brief when it lacks
// it, after Gemini compressed its history). Claude Code also has hooks of
// type "http" (the input POSTed, a 2xx JSON body read as a command
// hook's standard output); Gemini CLI's hooks are commands only (its
// reference: type "Currently only \"command\" is supported").
package agenthook

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
)

// Agent is an agent whose hooks crew answers: its name (crew hook NAME,
// crew serve's /hooks/NAME/) and its event for each moment, in the order
// its hooks are listed.
type Agent struct {
	Name, Title string
	Events      []Event
	// Tools is how the agent names crew's MCP tools to its model.
	Tools app.ToolNames
	// WaitEvents are the events that arm crew hook AGENT wait (an
	// asyncRewake hook: Claude Code only): the session's start, and after
	// each wake the stop that ends the woken turn, or a prompt.
	WaitEvents []string
	// FailOpen: the agent reads a failing hook other than by exit 1 as
	// "deny" (Gemini CLI); setup makes every failure exit 1
	// (agentconfig.Hooks.FailOpen).
	FailOpen bool
}

// Event is one of an agent's hook events and the moment it is.
type Event struct {
	Name string
	At   app.Moment
}

// Agents are the agents crew answers. Claude Code's events that are not
// here, on purpose (https://code.claude.com/docs/en/hooks): PreToolUse
// (context added before a tool runs would be read with the tool's result
// anyway, and a steer is better shown once the tool's outcome is known);
// SubagentStart and SubagentStop (a subagent is not the worker: its
// context is its own, and what it returns reaches the worker's loop,
// whose next tool result or stop delivers); PreCompact and PostCompact
// (SessionStart with source compact brings the brief back after a
// compaction); Notification, PermissionRequest, SessionEnd and the
// others (no context reaches the model from them). PostToolUseFailure is
// the same moment as PostToolUse: a failed tool call is a tool boundary
// too.
var Agents = []Agent{
	{"claude", "Claude Code", []Event{{"SessionStart", app.AtSessionStart}, {"PostToolUse", app.AtToolResult}, {"PostToolUseFailure", app.AtToolResult}, {"Stop", app.AtStop}, {"UserPromptSubmit", app.AtPrompt}},
		app.ToolNames{Prefix: "mcp__crew__", Loader: "ToolSearch"}, []string{"SessionStart", "UserPromptSubmit", "Stop"}, false},
	{"gemini", "Gemini CLI", []Event{{"SessionStart", app.AtSessionStart}, {"AfterTool", app.AtToolResult}, {"AfterAgent", app.AtStop}, {"BeforeAgent", app.AtPrompt}, {"BeforeModel", app.AtModelRequest}},
		app.ToolNames{}, nil, true},
	// Codex sends Claude Code's input (plus turn_id, tool_use_id and, for
	// an MCP tool, a structured tool_response, which crew does not read)
	// and reads Claude Code's answers, dropping silently one with a field
	// it does not know, plain text on PostToolUse, and exit 1; exit 2 on
	// PostToolUse would replace the tool's output, so crew never uses it
	// (https://developers.openai.com/codex/hooks). Its model's shell is
	// bash -lc, whose profile may reset PATH: the brief names crew by
	// its path (crew hook sets app.ToolNames.Crew). Its MCP tool calls
	// end at tool_timeout_sec: the brief says to go on with crew_await.
	// SessionStart comes again, source compact, after an
	// auto-compaction, as Claude Code's.
	{"codex", "Codex", []Event{{"SessionStart", app.AtSessionStart}, {"PostToolUse", app.AtToolResult}, {"Stop", app.AtStop}, {"UserPromptSubmit", app.AtPrompt}},
		app.ToolNames{Prefix: "mcp__crew__", Timeout: true}, nil, false},
}

// Find returns the agent named name; crew.ErrNotFound for none.
func Find(name string) (Agent, error) {
	i := slices.IndexFunc(Agents, func(a Agent) bool { return a.Name == name })
	if i < 0 {
		var names []string
		for _, a := range Agents {
			names = append(names, a.Name)
		}
		return Agent{}, fmt.Errorf("no agent %q answered by crew's hooks: %s: %w", name, strings.Join(names, " or "), crew.ErrNotFound)
	}
	return Agents[i], nil
}

// EventNames is "SessionStart, PostToolUse, Stop or UserPromptSubmit"
// with sep and last as given.
func (a Agent) EventNames(sep, last string) string {
	var names []string
	for _, ev := range a.Events {
		names = append(names, ev.Name)
	}
	return strings.Join(names[:len(names)-1], sep) + last + names[len(names)-1]
}

// Input is the part of a hook's input crew reads.
type Input struct {
	HookEventName  string      `json:"hook_event_name"`
	SessionID      string      `json:"session_id"`
	Source         string      `json:"source"`           // SessionStart: startup, resume, clear, compact
	StopHookActive bool        `json:"stop_hook_active"` // Stop, AfterAgent
	Prompt         string      `json:"prompt"`           // UserPromptSubmit
	LLMRequest     *LLMRequest `json:"llm_request"`      // BeforeModel (Gemini CLI)
}

// LLMRequest is the part crew reads and writes of the request Gemini CLI
// is about to send its model (BeforeModel's llm_request): its text
// contents in order, one message per content with text. An answer's
// messages replace the text of those contents in order, and any beyond
// them are added at the end (Gemini CLI 0.61, fromHookLLMRequest).
type LLMRequest struct {
	Messages []LLMMessage `json:"messages"`
}

// LLMMessage is one text content of an LLMRequest.
type LLMMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// text is the request's text, all messages joined.
func (r *LLMRequest) text() string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	return b.String()
}

// wakePrompt is how the prompt of Claude Code's UserPromptSubmit begins
// when no person typed it: the notice of a background task, among them
// an asyncRewake hook's exit 2 (crew hook claude wait's wake), which
// Claude Code 2.1.332 sends in the middle of a turn as
// "<task-notification>\n<summary>Stop hook feedback</summary>..." with
// the hook's standard error in a system reminder (captured from the real
// claude, realagent TestClaudeWokenHoldsFollowUp).
const wakePrompt = "<task-notification>"

// Wakes reports whether a's prompt may be its own wake (Claude Code's,
// woken by its wait hook, WaitEvents). No other agent has one: a prompt
// of Codex or Gemini CLI that begins as Claude's wake is a person's.
func (a Agent) Wakes() bool { return len(a.WaitEvents) > 0 }

// Woken reports whether the input's prompt is none a person typed
// (Claude Code's notice of a background task: wakePrompt). Only an agent
// that Wakes has one.
func (in Input) Woken() bool { return strings.HasPrefix(in.Prompt, wakePrompt) }

// ReadInput reads a hook's JSON input from r, at most 16 MiB (none: the
// zero input). Not JSON is crew.ErrInvalid.
func ReadInput(r io.Reader) (Input, error) {
	var in Input
	data, err := io.ReadAll(io.LimitReader(r, 16<<20))
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

// Request is the app.Deliver request of a's hook event with input in,
// reaching the agent by via (events.ViaHook, events.ViaHTTPHook). An
// event a has no hook for, or an input of another event, is
// crew.ErrInvalid.
func (a Agent) Request(event string, in Input, via string) (app.Deliver, error) {
	i := slices.IndexFunc(a.Events, func(ev Event) bool { return ev.Name == event })
	if i < 0 {
		return app.Deliver{}, fmt.Errorf("unknown %s hook event %q: %s: %w", a.Title, event, a.EventNames(", ", " or "), crew.ErrInvalid)
	}
	if in.HookEventName != "" && in.HookEventName != event {
		return app.Deliver{}, fmt.Errorf("hook %s got the input of %s: %w", event, in.HookEventName, crew.ErrInvalid)
	}
	return app.Deliver{Moment: a.Events[i].At, Session: in.SessionID, StopActive: in.StopHookActive, Woken: a.Events[i].At == app.AtPrompt && a.Wakes() && in.Woken(), Shown: in.LLMRequest.text(), Tools: a.Tools, Via: via}, nil
}

// Output is a hook's answer.
type Output struct {
	Decision           string          `json:"decision,omitempty"` // Stop, AfterAgent: "block"
	Reason             string          `json:"reason,omitempty"`
	HookSpecificOutput *SpecificOutput `json:"hookSpecificOutput,omitempty"`
}

// SpecificOutput is the event's own part of an answer: the text the
// model is shown.
type SpecificOutput struct {
	HookEventName     string      `json:"hookEventName"`
	AdditionalContext string      `json:"additionalContext,omitempty"`
	LLMRequest        *LLMRequest `json:"llm_request,omitempty"` // BeforeModel: the request with the brief put back
}

// Answer is the hook's answer to event with input in carrying delivery
// d: a blocked stop as decision "block" with the reason, text to show as
// additionalContext, or at a model request (BeforeModel) as in's request
// with the text put before its first message's; nil (no answer) for
// nothing to show.
func Answer(event string, in Input, d *app.Delivery) *Output {
	switch {
	case d.Moment == app.AtModelRequest:
		if d.Text == "" {
			return nil
		}
		var msgs []LLMMessage
		if in.LLMRequest != nil {
			msgs = slices.Clone(in.LLMRequest.Messages)
		}
		if len(msgs) == 0 {
			msgs = []LLMMessage{{Role: "user", Content: d.Text}}
		} else {
			msgs[0].Content = d.Text + "\n\n" + msgs[0].Content
		}
		return &Output{HookSpecificOutput: &SpecificOutput{HookEventName: event, LLMRequest: &LLMRequest{Messages: msgs}}}
	case d.Block:
		return &Output{Decision: "block", Reason: d.Text}
	case d.Text != "":
		return &Output{HookSpecificOutput: &SpecificOutput{HookEventName: event, AdditionalContext: d.Text}}
	}
	return nil
}
