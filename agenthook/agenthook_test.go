package agenthook

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/crew-dev/crew/app"
)

// TestRequestWoken: Claude Code's UserPromptSubmit whose prompt is the
// notice of a wake (its input as the real claude 2.1.332 sent it) is a
// woken prompt; a person's prompt, and another event, are not.
func TestRequestWoken(t *testing.T) {
	a, err := Find("claude")
	if err != nil {
		t.Fatal(err)
	}
	wake := `{"session_id":"s1","hook_event_name":"UserPromptSubmit","prompt":"<task-notification>\n<summary>Stop hook feedback</summary>\n</task-notification>\n<system-reminder>\nStop hook blocking error from command \"UserPromptSubmit\": crew: new from the leader\n</system-reminder>"}`
	for _, c := range []struct {
		event, input string
		woken        bool
	}{
		{"UserPromptSubmit", wake, true},
		{"UserPromptSubmit", `{"session_id":"s1","hook_event_name":"UserPromptSubmit","prompt":"Work on your crew task."}`, false},
		{"PostToolUse", `{"session_id":"s1","hook_event_name":"PostToolUse","prompt":"<task-notification>"}`, false},
	} {
		in, err := ReadInput(strings.NewReader(c.input))
		if err != nil {
			t.Fatal(err)
		}
		req, err := a.Request(c.event, in, "")
		if err != nil {
			t.Fatal(err)
		}
		if req.Woken != c.woken {
			t.Errorf("%s %s: Woken %v, want %v", c.event, c.input, req.Woken, c.woken)
		}
	}
}

// TestRequestWokenClaudeOnly: only Claude Code's prompt may be its
// wake. Codex and Gemini CLI have none: a person's prompt that begins as
// Claude's wake is a person's there, and its follow-up is not held back
// (the breaker's finding).
func TestRequestWokenClaudeOnly(t *testing.T) {
	for _, c := range []struct{ agent, event string }{{"codex", "UserPromptSubmit"}, {"gemini", "BeforeAgent"}} {
		a, err := Find(c.agent)
		if err != nil {
			t.Fatal(err)
		}
		req, err := a.Request(c.event, Input{SessionID: "s1", Prompt: "<task-notification> typed by a person"}, "")
		if err != nil {
			t.Fatal(err)
		}
		if req.Woken {
			t.Errorf("%s %s: a prompt that begins %s is Woken; only Claude Code has a wake", c.agent, c.event, wakePrompt)
		}
	}
}

// TestAnswerBeforeModel: Gemini CLI's BeforeModel input (llm_request's
// messages, as Gemini CLI 0.61 sends them) is the model request's text;
// the answer puts the brief before the first message's text, keeps the
// others as they are, and is no answer when there is no brief to add.
func TestAnswerBeforeModel(t *testing.T) {
	a, err := Find("gemini")
	if err != nil {
		t.Fatal(err)
	}
	in, err := ReadInput(strings.NewReader(`{"session_id":"s1","hook_event_name":"BeforeModel","llm_request":{"model":"gemini-2.5-pro","messages":[{"role":"user","content":"<state_snapshot>s</state_snapshot>"},{"role":"model","content":"Got it."}],"config":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req, err := a.Request("BeforeModel", in, "")
	if err != nil {
		t.Fatal(err)
	}
	if req.Moment != app.AtModelRequest || !strings.Contains(req.Shown, "<state_snapshot>s</state_snapshot>") || !strings.Contains(req.Shown, "Got it.") {
		t.Fatalf("request %+v", req)
	}
	out := Answer("BeforeModel", in, &app.Delivery{Moment: app.AtModelRequest, Text: "BRIEF"})
	b, _ := json.Marshal(out)
	want := `{"hookSpecificOutput":{"hookEventName":"BeforeModel","llm_request":{"messages":[{"role":"user","content":"BRIEF\n\n\u003cstate_snapshot\u003es\u003c/state_snapshot\u003e"},{"role":"model","content":"Got it."}]}}}`
	if string(b) != want {
		t.Fatalf("answer %s\nwant   %s", b, want)
	}
	if in.LLMRequest.Messages[0].Content != "<state_snapshot>s</state_snapshot>" {
		t.Fatal("the answer changed the input")
	}
	if out := Answer("BeforeModel", in, &app.Delivery{Moment: app.AtModelRequest}); out != nil {
		t.Fatalf("nothing to add, answer %+v", out)
	}
}
