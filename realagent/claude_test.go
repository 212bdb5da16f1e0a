package realagent

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crew-dev/crew/internal/fakemodel"
	"github.com/crew-dev/crew/internal/proc"
)

// claude starts claude -p in the project, set up by crew setup claude
// for task t1, against model; the prompt is the first user message.
func (p *project) claude(model *fakemodel.Server, args ...string) *agentRun {
	p.t.Helper()
	bin := agentBin(p.t, "claude")
	p.crew("setup", "claude", "--project", p.dir, "--run", "r1", "--task", "t1")
	// A user who ran Claude Code here once and trusted the project (its
	// settings' permissions apply only then).
	p.write(p.home+"/.claude.json", `{"hasCompletedOnboarding": true, "projects": {"`+p.dir+`": {"hasTrustDialogAccepted": true}}}`)
	env := p.env("ANTHROPIC_BASE_URL="+model.URL, "ANTHROPIC_API_KEY=sk-ant-fake", "ANTHROPIC_MODEL=claude-sonnet-4-6",
		"ANTHROPIC_SMALL_FAST_MODEL=claude-haiku-4-5", "CLAUDE_CODE_SKIP_PROMPT_HISTORY=1")
	return p.start(env, bin, append([]string{"-p", "--allowedTools", "Bash", "--debug-file", p.home + "/claude-debug.log"}, args...)...)
}

func bash(cmd string) fakemodel.Turn {
	return fakemodel.Turn{Tool: "Bash", Input: map[string]any{"command": cmd, "description": "run " + cmd}}
}

// TestClaudeWorker: the brief in the first request; a steer sent during
// a tool call in the very next request, also when the tool fails; a
// follow-up sent beside that steer is in no request before the turn's
// stop, though the steer's wake runs the UserPromptSubmit hooks in the
// middle of the turn (agenthook.Input.Woken); it blocks the first stop,
// and the second stop is allowed.
func TestClaudeWorker(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	model := fakemodel.Start(t, fakemodel.Anthropic, workerTurns(bash)...)
	a := p.claude(model, "Work on your crew task.")
	steerDuringTools(t, p, model, "Exit code 3", "task t1")
	// The steer sent during the failing tool wakes Claude Code (the wait
	// hook), whose UserPromptSubmit hooks then run in the middle of the
	// turn: the follow-up waits for the stop all the same.
	reqs := model.WaitMain(t, 4, time.Minute)
	if first := fakemodel.First(reqs, followText); first != 3 {
		t.Fatalf("the follow-up is first shown in request %d of 4 (0: none); want the fourth, at the stop it blocks:\n%s", first+1, reqs[max(first, 0)].Body)
	}
	// Shown once: one delivery, at the stop (Claude Code puts a stop
	// hook's reason in the request twice).
	if ev := p.crew("events", "--run", "r1", "--type", "message.delivered"); strings.Count(ev, "message.delivered") != 3 {
		t.Fatalf("want 3 deliveries (two steers, the follow-up):\n%s", ev)
	}
	if ev := p.crew("events", "--run", "r1", "--type", "message.delivered", "--json"); !strings.Contains(ev, `"via":"hook:stop"`) {
		t.Fatalf("the follow-up was not delivered at the stop:\n%s", ev)
	}
	// claude -p prints its last answer when the turn ends (and lingers
	// 30 s more for the wait hook it then kills: not waited for here).
	a.waitOutput(t, "Done, and gofmt run.", time.Minute)
	time.Sleep(200 * time.Millisecond)
	if n := len(model.Main()); n != 4 {
		t.Fatalf("%d main requests, want 4 (the second stop allowed)", n)
	}
	logHookTimings(t, p.home+"/claude-debug.log")
}

// hookTiming is a line of Claude Code's debug log timing a crew hook:
// the event, crew hook's own event argument, and the milliseconds.
var hookTiming = regexp.MustCompile(`Hooks: (\S+) \[\S*crew hook claude (\S+)[^\]]*\] (finished with status \d+|moved to the background) \((\d+)ms\)`)

// logHookTimings logs Claude Code's own timing of each crew hook, from
// its debug log (recorded for the README, not asserted).
func logHookTimings(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("no debug log: %v", err)
		return
	}
	var lines []string
	for _, m := range hookTiming.FindAllStringSubmatch(string(b), -1) {
		lines = append(lines, fmt.Sprintf("%s %s %s ms", m[1], m[2], m[4]))
	}
	t.Logf("Claude Code's timing of crew's hooks (debug log): %s", strings.Join(lines, "; "))
}

// mcpCall calls crew's MCP tool as Claude Code names it, loading it
// first with ToolSearch when Claude Code defers it (then the call is the
// second turn; else the second turn ends the turn).
func mcpCall(tool string, input map[string]any) []fakemodel.Turn {
	name := "mcp__crew__" + tool
	called := false
	return []fakemodel.Turn{
		{Pick: func(tools []string) (string, map[string]any) {
			if slices.Contains(tools, name) {
				called = true
				return name, input
			}
			return "ToolSearch", map[string]any{"query": "select:" + name, "max_results": 1}
		}},
		{Pick: func(tools []string) (string, map[string]any) {
			if called {
				return "", nil
			}
			return name, input
		}},
	}
}

// TestClaudeAsk: the model calls crew_ask over MCP with wait; crew
// respond answers it, and the answer is the tool's result in the next
// request.
func TestClaudeAsk(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	ask := mcpCall("crew_ask", map[string]any{"question": "Keep the byte version?", "wait": true})
	model := fakemodel.Start(t, fakemodel.Anthropic, append(ask, fakemodel.Turn{Text: "Done."})...)
	a := p.claude(model, "Work on your crew task.")
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(p.crew("task", "show", "t1", "--run", "r1"), "waiting") {
		if time.Now().After(deadline) {
			t.Fatalf("the task is not waiting:\n%s\n%s", p.crew("task", "show", "t1", "--run", "r1"), a.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	answer := "No: use a rune slice."
	p.crew("respond", "t1", answer, "--run", "r1")
	a.waitOutput(t, "Done.", time.Minute)
	reqs := model.Main()
	last := reqs[len(reqs)-1]
	if !last.Shows(answer) {
		t.Fatalf("the answer is not in the request after crew_ask:\n%s", last.Body)
	}
	t.Logf("%d main requests (ToolSearch first: %v)", len(reqs), fakemodel.First(reqs, "select:mcp__crew__crew_ask") >= 0)
}

// TestClaudeStreamJSONWoken: a claude -p --input-format stream-json
// session whose turn ended, standard input still open, is woken by a
// steer (the wait hook crew setup registers) and shown it.
func TestClaudeStreamJSONWoken(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	model := fakemodel.Start(t, fakemodel.Anthropic, fakemodel.Turn{Text: "Waiting for work."}, fakemodel.Turn{Text: "Switched."})
	stdin, w, err := os.Pipe() // a file: the agent's exit does not wait for a copy
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); stdin.Close() })
	p.stdin = stdin
	a := p.claude(model, "--input-format", "stream-json", "--output-format", "stream-json", "--verbose")
	io.WriteString(w, `{"type":"user","message":{"role":"user","content":"Work on your crew task."}}`+"\n")
	a.waitOutput(t, "Waiting for work.", time.Minute)
	a.waitOutput(t, `"type":"result"`, time.Minute)
	time.Sleep(500 * time.Millisecond) // idle
	steer := "Switch to the rune-slice version."
	p.crew("steer", "t1", steer, "--run", "r1")
	sent := time.Now()
	reqs := model.WaitMain(t, 2, time.Minute)
	if !reqs[1].Shows(steer) || reqs[1].Count(steer) != 1 {
		t.Fatalf("the woken request does not show the steer once:\n%s", reqs[1].Body)
	}
	t.Logf("idle stream-json session: steer → next model request %v", reqs[1].At.Sub(sent).Round(time.Millisecond))
}

// TestClaudeLeader: a Claude Code leader (crew setup claude --as leader)
// is shown a worker's question at its next tool result and answers it
// with crew_respond, while the worker's crew ask --wait gets the answer;
// idle, it is woken by the worker's next question.
func TestClaudeLeader(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	answer := "Use a rune slice."
	respond := mcpCall("crew_respond", map[string]any{"task": "t1", "body": answer})
	turns := append([]fakemodel.Turn{bash("sleep 2")}, respond...)
	model := fakemodel.Start(t, fakemodel.Anthropic, append(turns, fakemodel.Turn{Text: "Answered."}, fakemodel.Turn{Text: "Seen."})...)
	stdin, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); stdin.Close() })
	p.stdin = stdin
	bin := agentBin(t, "claude")
	p.crew("setup", "claude", "--project", p.dir, "--run", "r1", "--as", "leader")
	p.write(p.home+"/.claude.json", `{"hasCompletedOnboarding": true, "projects": {"`+p.dir+`": {"hasTrustDialogAccepted": true}}}`)
	env := p.env("ANTHROPIC_BASE_URL="+model.URL, "ANTHROPIC_API_KEY=sk-ant-fake", "ANTHROPIC_MODEL=claude-sonnet-4-6")
	a := p.start(env, bin, "-p", "--allowedTools", "Bash", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose")
	io.WriteString(w, `{"type":"user","message":{"role":"user","content":"Lead the run."}}`+"\n")
	reqs := model.WaitMain(t, 1, time.Minute)
	if !reqs[0].Shows("leader") {
		t.Fatalf("no leader's brief:\n%s", reqs[0].Body)
	}
	// The worker asks while the leader's tool call runs.
	question := "Keep the byte version?"
	askWhileLeaderWorks(t, p, model, a, question, answer)
	a.waitOutput(t, "Answered.", time.Minute)
	a.waitOutput(t, `"type":"result"`, time.Minute)
	n := len(model.Main())
	time.Sleep(500 * time.Millisecond) // idle
	report := "Half the callers are migrated."
	p.crew("report", report, "--run", "r1", "--task", "t1")
	sent := time.Now()
	reqs = model.WaitMain(t, n+1, time.Minute)
	if !reqs[n].Shows(report) {
		t.Fatalf("the idle leader was not woken with the worker's report:\n%s", reqs[n].Body)
	}
	t.Logf("idle leader: report → next model request %v", reqs[n].At.Sub(sent).Round(time.Millisecond))
}

// TestClaudeCompactBrief: after /compact, the brief comes back
// (SessionStart with source compact) in the next request.
func TestClaudeCompactBrief(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	// The compaction's request (it offers the tools too) takes the second
	// turn: its summary.
	model := fakemodel.Start(t, fakemodel.Anthropic, fakemodel.Turn{Text: "Waiting for work."}, fakemodel.Turn{Text: "<analysis>Nothing done yet.</analysis>\n<summary>The user asked to work on the task.</summary>"}, fakemodel.Turn{Text: "Going on."})
	stdin, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); stdin.Close() })
	p.stdin = stdin
	a := p.claude(model, "--input-format", "stream-json", "--output-format", "stream-json", "--verbose")
	io.WriteString(w, `{"type":"user","message":{"role":"user","content":"Work on your crew task."}}`+"\n")
	a.waitOutput(t, "Waiting for work.", time.Minute)
	io.WriteString(w, `{"type":"user","message":{"role":"user","content":"/compact"}}`+"\n")
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(a.output(), "compact_boundary") {
		if time.Now().After(deadline) {
			t.Fatalf("no compaction:\n%s", a.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	io.WriteString(w, `{"type":"user","message":{"role":"user","content":"Go on."}}`+"\n")
	reqs := model.WaitMain(t, 3, time.Minute)
	last := reqs[2]
	if last.Shows("Waiting for work.") || !last.Shows("The user asked to work on the task.") {
		t.Fatalf("the request after /compact still has the history before it:\n%s", last.Body)
	}
	if !last.Shows("You are a crew worker: run r1") {
		t.Fatalf("the brief is not back after /compact:\n%s", last.Body)
	}
}

// TestClaudeTmuxWoken: an interactive Claude Code under tmux, idle at its
// prompt after its first turn, is woken by a steer (the wait hook crew
// setup registers) and shown it once.
func TestClaudeTmuxWoken(t *testing.T) {
	t.Parallel()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("no tmux on PATH (.ci/run installs it): the interactive Claude Code runs in a tmux pane")
	}
	p := newProject(t)
	bin := agentBin(t, "claude")
	model := fakemodel.Start(t, fakemodel.Anthropic, fakemodel.Turn{Text: "Waiting for work."}, fakemodel.Turn{Text: "Switched."})
	p.crew("setup", "claude", "--project", p.dir, "--run", "r1", "--task", "t1")
	key := "sk-ant-fake-interactive-0123456789"
	// Onboarding done, the project trusted, the API key approved: no
	// dialog before the prompt.
	p.write(p.home+"/.claude.json", `{"hasCompletedOnboarding": true, "theme": "dark", "customApiKeyResponses": {"approved": ["`+key[len(key)-20:]+`"], "rejected": []}, "projects": {"`+p.dir+`": {"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}}}`)
	env := p.env("ANTHROPIC_BASE_URL="+model.URL, "ANTHROPIC_API_KEY="+key, "ANTHROPIC_MODEL=claude-sonnet-4-6",
		"ANTHROPIC_SMALL_FAST_MODEL=claude-haiku-4-5", "TERM=xterm-256color")
	socket := filepath.Join(p.home, "tmux.sock")
	args := []string{"-S", socket, "new-session", "-d", "-x", "200", "-y", "50", "-c", p.dir, "env", "-i"}
	args = append(append(args, env...), bin, "Work on your crew task.")
	if out, err := exec.Command(tmux, args...).CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	pane := func() string {
		out, _ := exec.Command(tmux, "-S", socket, "capture-pane", "-p").CombinedOutput()
		return string(out)
	}
	out, err := exec.Command(tmux, "-S", socket, "display-message", "-p", "#{pane_pid}").Output()
	if err != nil {
		t.Fatalf("tmux display-message: %v", err)
	}
	panePID, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("tmux pane pid %q: %v", out, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the pane:\n%s", pane())
		}
		exec.Command(tmux, "-S", socket, "kill-server").Run()
		// Claude Code and its hooks still write in HOME and the project
		// as they end: the temporary directories go once they have.
		endSession(t, panePID)
	})
	model.WaitMain(t, 1, time.Minute)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(pane(), "Waiting for work.") {
		if time.Now().After(deadline) {
			t.Fatalf("the first turn did not end")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // idle at its prompt, the wait hook armed by the stop
	p.crew("steer", "t1", steerText, "--run", "r1")
	sent := time.Now()
	reqs := model.WaitMain(t, 2, time.Minute)
	if reqs[1].Count(steerText) != 1 {
		t.Fatalf("the woken request does not show the steer once:\n%s", reqs[1].Body)
	}
	t.Logf("idle interactive session: steer → next model request %v", reqs[1].At.Sub(sent).Round(time.Millisecond))
}

// askWhileLeaderWorks runs a worker's crew ask --wait for task t1 of run
// r1 in p while the leader a is in its first tool call: the question must
// be in the leader's next (second) model request, and the answer the
// leader gives must reach ask --wait within a minute.
func askWhileLeaderWorks(t *testing.T, p *project, model *fakemodel.Server, a *agentRun, question, answer string) {
	t.Helper()
	ask := exec.Command(crewBin, "--dir", p.dir, "ask", question, "--run", "r1", "--task", "t1", "--wait", "--timeout", "2m")
	var out strings.Builder
	ask.Stdout, ask.Stderr = &out, &out
	if err := ask.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ask.Wait() }()
	reqs := model.WaitMain(t, 2, time.Minute)
	if !reqs[1].Shows(question) {
		t.Fatalf("the worker's question is not in the leader's next request:\n%s", reqs[1].Body)
	}
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), answer) {
			t.Fatalf("crew ask --wait: %v: %s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("crew ask --wait got no answer:\n%s", a.output())
	}
}

// endSession waits until every process of session sid (a tmux pane's,
// whose first process leads it) has ended, killing those left after 5 s.
// Linux: it reads the session of each process in /proc/PID/stat (proc(5)).
func endSession(t *testing.T, sid int) {
	t.Helper()
	for _, kill := range []bool{false, true} {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			left := sessionProcs(sid)
			if len(left) == 0 {
				return
			}
			if kill {
				for _, pid := range left {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("processes of session %d still there 10 s after tmux kill-server: %v", sid, sessionProcs(sid))
}

// sessionProcs returns the processes of session sid that have not ended
// (zombies have).
func sessionProcs(sid int) []int {
	var pids []int
	for _, p := range proc.Live() {
		if p.Session == sid {
			pids = append(pids, p.PID)
		}
	}
	return pids
}
