package main

// crew hook claude|gemini: the documented hook inputs
// (testdata/hooks/<agent>, shapes from https://code.claude.com/docs/en/hooks
// and https://geminicli.com/docs/hooks/reference) fed to the command, and
// its JSON answers checked; a simulated agent loop that calls the hooks
// between fake tool calls while the leader sends.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crew-dev/crew/app"
)

// hookFixture is a state root with run r1 and task t1 (started), and a
// session id of its own (the stop counter is per session).
type hookFixture struct {
	t       *testing.T
	dir     string
	session string
	agent   string // the hook's agent: claude unless set
}

func newHookFixture(t *testing.T) *hookFixture {
	t.Parallel()
	f := &hookFixture{t: t, dir: t.TempDir(), session: strings.ReplaceAll(t.Name(), "/", "_") + "-" + filepath.Base(t.TempDir())}
	f.crew("", "init")
	f.crew("", "run", "create", "--id", "r1", "--title", "fix Reverse")
	f.crew("", "task", "add", "t1", "--title", "make Reverse keep runes whole", "--done-when", "go vet ./...")
	f.crew("", "task", "start", "--task", "t1")
	return f
}

// crew runs crew in the fixture's root and returns its stdout; it fails
// the test on a non-zero exit.
func (f *hookFixture) crew(stdin string, args ...string) string {
	f.t.Helper()
	var stdout, stderr bytes.Buffer
	full := append([]string{"crew", "--dir", f.dir}, args...)
	if args[0] != "init" && args[0] != "run" {
		full = append(full, "--run", "r1")
	}
	if code := Main(full, strings.NewReader(stdin), &stdout, &stderr); code != 0 {
		f.t.Fatalf("crew %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.String()
}

// hook feeds the fixture testdata/hooks/<agent>/<fixture>.json to crew
// hook <agent> <event> as task t1 and returns the decoded answer (nil
// when it printed nothing).
func (f *hookFixture) hook(event, fixture string) *hookOutput {
	f.t.Helper()
	agent := cmp.Or(f.agent, "claude")
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "hooks", agent, fixture+".json"))
	if err != nil {
		f.t.Fatal(err)
	}
	var in map[string]any
	if err := json.Unmarshal(data, &in); err != nil {
		f.t.Fatal(err)
	}
	in["session_id"] = f.session
	data, _ = json.Marshal(in)
	out := f.crew(string(data), "hook", agent, event, "--task", "t1")
	if out == "" {
		return nil
	}
	var o hookOutput
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		f.t.Fatalf("hook %s printed %q: %v", event, out, err)
	}
	return &o
}

func (f *hookFixture) context(o *hookOutput, event string) string {
	f.t.Helper()
	if o == nil || o.HookSpecificOutput == nil || o.HookSpecificOutput.HookEventName != event || o.Decision != "" {
		f.t.Fatalf("hook %s answered %+v, want additionalContext", event, o)
	}
	return o.HookSpecificOutput.AdditionalContext
}

// status returns the status of message id for t1.
func (f *hookFixture) status(id string) string {
	f.t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(f.crew("", "pending", "--task", "t1", "--json")), "\n") {
		var m struct{ ID, Status string }
		json.Unmarshal([]byte(line), &m)
		if m.ID == id {
			return m.Status
		}
	}
	return "closed"
}

func (f *hookFixture) send(kind, body string, flags ...string) string {
	f.t.Helper()
	return strings.TrimSpace(f.crew("", append([]string{kind, "t1", body}, flags...)...))
}

func TestHookClaudeSessionStart(t *testing.T) {
	f := newHookFixture(t)
	steer := f.send("steer", "Keep ReverseBytes.")
	follow := f.send("follow-up", "Then add a test for an empty string.")
	ctx := f.context(f.hook("SessionStart", "SessionStart"), "SessionStart")
	for _, want := range []string{"run r1 (fix Reverse)", "task t1: make Reverse keep runes whole", "Status: running", "leader is leader",
		"exits 0: go vet ./...", "Messages not yet acknowledged (2)", steer, "Keep ReverseBytes.", follow,
		// crew's MCP tools as Claude Code shows them, and how to load them when deferred
		"mcp__crew__crew_ask", "mcp__crew__crew_task_start", "load them with ToolSearch"} {
		if !strings.Contains(ctx, want) {
			t.Errorf("SessionStart context lacks %q:\n%s", want, ctx)
		}
	}
	if f.status(steer) != "delivered" {
		t.Errorf("steer %s is %s after SessionStart, want delivered", steer, f.status(steer))
	}
	// After a compaction the brief comes again, with every message not
	// yet acknowledged: delivered ones too.
	f.crew("", "ack", "--task", "t1", steer)
	ctx = f.context(f.hook("SessionStart", "SessionStart"), "SessionStart")
	if strings.Contains(ctx, steer) || !strings.Contains(ctx, follow) {
		t.Errorf("SessionStart after an ack:\n%s", ctx)
	}
}

func TestHookClaudePostToolUse(t *testing.T) {
	f := newHookFixture(t)
	if o := f.hook("PostToolUse", "PostToolUse"); o != nil {
		t.Fatalf("nothing new: hook answered %+v", o)
	}
	follow := f.send("follow-up", "Later: update the changelog.")
	normal := f.send("steer", "Use utf8.DecodeRuneInString.")
	urgent := f.send("steer", "Stop: the tests are on another branch.", "--priority", "urgent")
	nudge := f.send("nudge", "Status?")
	ctx := f.context(f.hook("PostToolUse", "PostToolUse"), "PostToolUse")
	iu, in, inu := strings.Index(ctx, urgent), strings.Index(ctx, normal), strings.Index(ctx, nudge)
	if iu < 0 || in < 0 || inu < 0 || iu > in {
		t.Fatalf("PostToolUse context, want the urgent steer first, then the steer and the nudge:\n%s", ctx)
	}
	if strings.Contains(ctx, follow) {
		t.Fatalf("a follow-up was delivered at a tool boundary:\n%s", ctx)
	}
	// The command the context names works in a shell without CREW_TASK.
	if !strings.Contains(ctx, "crew ack --task t1 ID") {
		t.Errorf("PostToolUse context, want it to name crew ack --task t1 ID:\n%s", ctx)
	}
	f.crew("", "ack", "--task", "t1", nudge)
	for _, id := range []string{urgent, normal} {
		if s := f.status(id); s != "delivered" {
			t.Errorf("%s is %s, want delivered", id, s)
		}
	}
	if s := f.status(follow); s != "pending" {
		t.Errorf("follow-up is %s, want pending (for the stop)", s)
	}
	if o := f.hook("PostToolUse", "PostToolUse"); o != nil {
		t.Fatalf("delivered twice: %+v", o)
	}
}

func TestHookClaudeUserPromptSubmit(t *testing.T) {
	f := newHookFixture(t)
	follow := f.send("follow-up", "Also fix Title.")
	ctx := f.context(f.hook("UserPromptSubmit", "UserPromptSubmit"), "UserPromptSubmit")
	if !strings.Contains(ctx, follow) || !strings.Contains(ctx, "Also fix Title.") {
		t.Fatalf("UserPromptSubmit context:\n%s", ctx)
	}
	if o := f.hook("UserPromptSubmit", "UserPromptSubmit"); o != nil {
		t.Fatalf("delivered twice: %+v", o)
	}
}

func TestHookClaudeStop(t *testing.T) {
	f := newHookFixture(t)
	if o := f.hook("Stop", "Stop"); o != nil {
		t.Fatalf("nothing open: Stop answered %+v", o)
	}
	// A steer delivered but not acknowledged blocks a stop once per turn.
	steer := f.send("steer", "Keep ReverseBytes.")
	f.hook("PostToolUse", "PostToolUse")
	o := f.hook("Stop", "Stop")
	if o == nil || o.Decision != "block" || !strings.Contains(o.Reason, steer) {
		t.Fatalf("unacknowledged steer: Stop answered %+v", o)
	}
	if o := f.hook("Stop", "Stop-active"); o != nil {
		t.Fatalf("the same steer blocked twice in a row: %+v", o)
	}
	f.crew("", "ack", "--task", "t1", steer)
	// A task waiting on its question is reminded to await.
	q := strings.TrimSpace(f.crew("", "ask", "--task", "t1", "Skip the test?"))
	o = f.hook("Stop", "Stop")
	if o == nil || o.Decision != "block" || !strings.Contains(o.Reason, "crew await "+q) {
		t.Fatalf("waiting task: Stop answered %+v", o)
	}
	f.crew("", "respond", "t1", "No.")
	f.crew("", "await", q)
	if o := f.hook("Stop", "Stop"); o != nil {
		t.Fatalf("answered question: Stop answered %+v", o)
	}
	// No more than app.MaxStopBlocks stops in a row, whatever keeps coming.
	blocked := 0
	for i := 0; i < app.MaxStopBlocks+2; i++ {
		f.send("follow-up", "one more thing")
		fixture := "Stop-active"
		if i == 0 {
			fixture = "Stop"
		}
		if o := f.hook("Stop", fixture); o != nil {
			blocked++
		} else {
			break
		}
	}
	if blocked != app.MaxStopBlocks {
		t.Fatalf("%d stops in a row blocked, want %d", blocked, app.MaxStopBlocks)
	}
}

// TestHookAgentLoop: a simulated agent of each kind — tool calls, each
// followed by its tool hook, then a stop — while the leader sends. A
// steer sent mid-loop arrives at the next tool boundary, exactly once; a
// follow-up blocks exactly one stop; nothing is delivered twice.
func TestHookAgentLoop(t *testing.T) {
	for _, a := range hookAgents {
		t.Run(a.name, func(t *testing.T) {
			f := newHookFixture(t)
			f.agent = a.name
			testHookAgentLoop(t, f, a)
		})
	}
}

func testHookAgentLoop(t *testing.T, f *hookFixture, a hookAgent) {
	event := map[app.Moment]string{}
	for _, ev := range a.events {
		event[ev.at] = ev.name
	}
	start, tool, stop, prompt := event[app.AtSessionStart], event[app.AtToolResult], event[app.AtStop], event[app.AtPrompt]
	f.context(f.hook(start, start), start)
	seen := map[string]int{}    // message id -> times shown
	arrived := map[string]int{} // message id -> tool call after which it was shown
	var steer, follow string
	for call := 1; call <= 6; call++ {
		// ... the agent's tool call runs here; the leader acts meanwhile:
		switch call {
		case 2:
			steer = f.send("steer", "Switch to the rune-slice version.")
		case 4:
			follow = f.send("follow-up", "When done, run gofmt.")
		}
		if o := f.hook(tool, tool); o != nil {
			ctx := f.context(o, tool)
			for _, id := range []string{steer, follow} {
				if id != "" && strings.Contains(ctx, id) {
					seen[id]++
					arrived[id] = call
				}
			}
		}
	}
	if arrived[steer] != 2 || seen[steer] != 1 {
		t.Fatalf("steer sent during call 2 was shown %d times, after call %d; want once, after call 2", seen[steer], arrived[steer])
	}
	if seen[follow] != 0 {
		t.Fatal("the follow-up was shown at a tool boundary")
	}
	f.crew("", "ack", "--task", "t1", steer)
	o := f.hook(stop, stop)
	if o == nil || o.Decision != "block" || !strings.Contains(o.Reason, follow) {
		t.Fatalf("first %s: %+v, want blocked by the follow-up", stop, o)
	}
	if o := f.hook(stop, stop+"-active"); o != nil {
		t.Fatalf("second %s blocked too: %+v", stop, o)
	}
	if o := f.hook(prompt, prompt); o != nil {
		t.Fatalf("delivered again at the next prompt: %+v", o)
	}
	nudge := f.send("nudge", "Status?")
	if ctx := f.context(f.hook(prompt, prompt), prompt); !strings.Contains(ctx, nudge) {
		t.Fatalf("%s context lacks the nudge %s:\n%s", prompt, nudge, ctx)
	}
}

func TestHookClaudeNoTaskNoAnswer(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := Main([]string{"crew", "hook", "claude", "PostToolUse"}, strings.NewReader(`{"hook_event_name":"PostToolUse"}`), &stdout, &stderr)
	if code != 0 || stdout.Len() != 0 {
		t.Fatalf("outside crew: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	code = Main([]string{"crew", "hook", "claude", "Stop", "--task", "t1", "--dir", t.TempDir()}, strings.NewReader(`{}`), &stdout, &stderr)
	if code != exitIO {
		t.Fatalf("no state root: exit %d, want %d (never 2, which blocks the agent)", code, exitIO)
	}
}

// TestHookWaitRacesToolResult: a steer sent while the wait hook waits and
// the agent's PostToolUse hook runs at the same moment (real processes,
// the crew on PATH) is shown by exactly one of them, whichever marked it
// delivered: never twice, never by neither.
func TestHookWaitRacesToolResult(t *testing.T) {
	f := newHookFixture(t)
	bin, err := exec.LookPath("crew")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "CREW_DIR="+f.dir, "CREW_RUN=r1", "CREW_TASK=t1", "TMPDIR="+t.TempDir())
	for i := range 10 {
		wait := exec.Command(bin, "hook", "claude", "wait")
		wait.Env, wait.Stdin = env, strings.NewReader(`{"hook_event_name":"Stop","session_id":"`+f.session+`"}`)
		var woke bytes.Buffer
		wait.Stderr = &woke
		if err := wait.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- wait.Wait() }()
		time.Sleep(50 * time.Millisecond) // not a timing assertion: either order must give one delivery
		steer := f.send("steer", fmt.Sprintf("steer %d", i))
		post := exec.Command(bin, "hook", "claude", "PostToolUse")
		post.Env, post.Stdin = env, strings.NewReader(`{"hook_event_name":"PostToolUse","session_id":"`+f.session+`"}`)
		shown, err := post.Output()
		if err != nil {
			t.Fatalf("PostToolUse: %v", err)
		}
		byHook := strings.Contains(string(shown), steer)
		if byHook {
			f.send("steer", "release the waiter") // the waiter still waits: wake it with another
		}
		err = <-exited
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != wakeExit {
			t.Fatalf("the wait hook: %v, want exit %d: %s", err, wakeExit, woke.String())
		}
		byWake := strings.Contains(woke.String(), steer)
		if byHook == byWake {
			t.Fatalf("steer %d shown by the tool result: %v, by the wake: %v; want exactly one", i, byHook, byWake)
		}
		for _, line := range strings.Split(strings.TrimSpace(f.crew("", "inbox", "--task", "t1", "--json")), "\n") {
			var m struct{ ID string }
			json.Unmarshal([]byte(line), &m)
			f.crew("", "ack", "--task", "t1", m.ID)
		}
	}
}
