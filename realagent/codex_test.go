package realagent

import (
	"slices"
	"testing"

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
	model := fakemodel.Start(t, fakemodel.OpenAI, workerTurns(codexShell)...)
	a := p.codex(model, "Work on your crew task.")
	reqs := steerDuringTools(t, p, model, "", "The crew command is "+crewBin)
	followUpHoldsStop(t, model, a, reqs)
}
