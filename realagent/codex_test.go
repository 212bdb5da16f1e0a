package realagent

import (
	"slices"
	"testing"
	"time"

	"github.com/crew-dev/crew/internal/fakemodel"
)

// codex starts codex exec in the project, set up by crew setup codex for
// task t1, against model (a model provider of its user config), trusting
// the project and its hooks as crew setup says a headless worker must.
func (p *project) codex(model *fakemodel.Server, prompt string) *agentRun {
	p.t.Helper()
	bin := agentBin(p.t, "codex")
	p.crew("setup", "codex", "--project", p.dir, "--run", "r1", "--task", "t1")
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
	model := fakemodel.Start(t, fakemodel.OpenAI,
		codexShell("sleep 2"), codexShell("sleep 2; exit 3"), fakemodel.Turn{Text: "Done."}, fakemodel.Turn{Text: "Done, and gofmt run."})
	a := p.codex(model, "Work on your crew task.")
	reqs := model.WaitMain(t, 1, time.Minute)
	t.Logf("tools: %v", reqs[0].Tools)
	if !reqs[0].Shows("You are a crew worker: run r1") || !reqs[0].Shows("The crew command is "+crewBin) {
		t.Fatalf("the first request has no brief naming crew by its path:\n%s", reqs[0].Body)
	}
	steer := "Switch to the rune-slice version."
	p.crew("steer", "t1", steer, "--run", "r1")
	sent := time.Now()
	reqs = model.WaitMain(t, 2, time.Minute)
	if !reqs[1].Shows(steer) {
		t.Fatalf("the steer sent during the tool call is not in the next request:\n%s", reqs[1].Body)
	}
	t.Logf("steer → next model request: %v (the request came %v after the 2 s tool call's)", reqs[1].At.Sub(sent).Round(time.Millisecond), (reqs[1].At.Sub(reqs[0].At) - 2*time.Second).Round(time.Millisecond))
	failing, follow := "Also keep the old tests.", "When done, run gofmt."
	p.crew("steer", "t1", failing, "--run", "r1")
	p.crew("follow-up", "t1", follow, "--run", "r1")
	reqs = model.WaitMain(t, 3, time.Minute)
	if !reqs[2].Shows(failing) {
		t.Fatalf("the steer sent during the failing command is not in the next request:\n%s", reqs[2].Body)
	}
	if reqs[2].Shows(follow) {
		t.Fatal("the follow-up was shown at a tool result")
	}
	reqs = model.WaitMain(t, 4, time.Minute)
	if reqs[3].Count(follow) != 1 {
		t.Fatalf("the follow-up did not block the stop:\n%s", reqs[3].Body)
	}
	a.wait(t, time.Minute)
	if n := len(model.Main()); n != 4 {
		t.Fatalf("%d main requests, want 4 (the second stop allowed)", n)
	}
}
