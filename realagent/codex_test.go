package realagent

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crew-dev/crew/internal/fakemodel"
)

// codex starts codex exec in the project, set up by crew setup codex for
// task t1, against model (a model provider of its user config), trusting
// the project and its hooks as crew setup says a headless worker must.
func (p *project) codex(model *fakemodel.Server, prompt string, as ...string) *agentRun {
	p.t.Helper()
	bin := agentBin(p.t, "codex")
	who := []string{"--task", "t1"}
	if len(as) > 0 {
		who = []string{"--as", as[0]}
	}
	p.crew(append([]string{"setup", "codex", "--project", p.dir, "--run", "r1"}, who...)...)
	p.write(p.home+"/.codex/config.toml", `model = "gpt-5-codex"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "`+model.URL+`/v1"
wire_api = "responses"
env_key = "FAKE_OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
`)
	env := p.env("FAKE_OPENAI_API_KEY=sk-fake", "CODEX_HOME="+p.home+"/.codex")
	return p.start(env, bin, "exec", "--trust", "--dangerously-bypass-hook-trust", "--sandbox", "danger-full-access", prompt)
}

// codexShell is a call of Codex's shell tool, by the name and input
// shape the request offers.
func codexShell(cmd string) fakemodel.Turn {
	return fakemodel.Turn{Pick: func(tools []string) (string, map[string]any) {
		switch {
		case slices.Contains(tools, "exec_command"):
			return "exec_command", map[string]any{"cmd": cmd}
		case slices.Contains(tools, "shell_command"):
			return "shell_command", map[string]any{"command": cmd}
		}
		return "shell", map[string]any{"command": []string{"bash", "-lc", cmd}}
	}}
}

// TestCodexWorker: what crew setup codex writes works in the real Codex:
// the brief (naming crew by its path) in the first request; a steer
// sent during a shell command in the very next request, also when the
// command fails; a follow-up blocks the first stop, and the second stop
// is allowed.
func TestCodexWorker(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	model := fakemodel.Start(t, fakemodel.OpenAI, workerTurns(codexShell)...)
	a := p.codex(model, "Work on your crew task.")
	reqs := steerDuringTools(t, p, model, "", "The crew command is "+crewBin)
	followUpHoldsStop(t, model, a, reqs)
}

// codexMCP is a call of crew's MCP tool as Codex offers it: inside the
// namespace mcp__crew (the Responses API's tools of type namespace),
// called by the namespace and the tool's own name.
func codexMCP(tool string, input map[string]any) fakemodel.Turn {
	return fakemodel.Turn{Tool: "mcp__crew." + tool, Input: input}
}

// offers fails the test unless the first request offers crew's tool in
// Codex's namespace (else codexMCP's call would test nothing).
func offers(t *testing.T, req fakemodel.Request, tool string) {
	t.Helper()
	if !slices.Contains(req.Tools, "mcp__crew."+tool) {
		t.Fatalf("the request offers no %s in the namespace mcp__crew: %v", tool, req.Tools)
	}
}

// TestCodexAsk: the model calls crew_ask over MCP with wait (Codex's
// namespace mcp__crew); crew respond answers it, and the answer is the
// tool's output in the next request.
func TestCodexAsk(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	question, answer := "Keep the byte version?", "No: use a rune slice."
	model := fakemodel.Start(t, fakemodel.OpenAI, codexMCP("crew_ask", map[string]any{"question": question, "wait": true}), fakemodel.Turn{Text: "Done."})
	a := p.codex(model, "Work on your crew task.")
	offers(t, model.WaitMain(t, 1, time.Minute)[0], "crew_ask")
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(p.crew("task", "show", "t1", "--run", "r1"), "waiting") {
		if time.Now().After(deadline) {
			t.Fatalf("the task is not waiting:\n%s\n%s", p.crew("task", "show", "t1", "--run", "r1"), a.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.crew("respond", "t1", answer, "--run", "r1")
	a.wait(t, time.Minute)
	reqs := model.Main()
	if len(reqs) != 2 || !reqs[1].Shows(answer) || !strings.Contains(reqs[1].Body, "function_call_output") {
		t.Fatalf("the answer is not crew_ask's output in the next request (%d requests):\n%s", len(reqs), reqs[len(reqs)-1].Body)
	}
}

// TestCodexLeader: a Codex leader (crew setup codex --as leader) is shown
// a worker's question at its next tool result, and answers it with
// crew_respond, while the worker's crew ask --wait gets the answer.
func TestCodexLeader(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	question, answer := "Keep the byte version?", "Use a rune slice."
	model := fakemodel.Start(t, fakemodel.OpenAI, codexShell("sleep 2"), codexMCP("crew_respond", map[string]any{"task": "t1", "body": answer}), fakemodel.Turn{Text: "Answered."})
	a := p.codex(model, "Lead the run.", "leader")
	reqs := model.WaitMain(t, 1, time.Minute)
	offers(t, reqs[0], "crew_respond")
	if !reqs[0].Shows("leader of run r1") {
		t.Fatalf("no leader's brief:\n%s", reqs[0].Body)
	}
	// The worker asks while the leader's shell command runs.
	askWhileLeaderWorks(t, p, model, a, question, answer)
	a.wait(t, time.Minute)
}
