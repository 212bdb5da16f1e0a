package realagent

import (
	"testing"

	"github.com/crew-dev/crew/internal/fakemodel"
)

// gemini starts gemini -p in the project, set up by crew setup gemini
// for task t1, against model (GOOGLE_GEMINI_BASE_URL), with the folder
// trust crew setup says a headless worker needs.
func (p *project) gemini(model *fakemodel.Server, prompt string) *agentRun {
	p.t.Helper()
	bin := agentBin(p.t, "gemini")
	p.crew("setup", "gemini", "--project", p.dir, "--run", "r1", "--task", "t1")
	p.write(p.home+"/.gemini/settings.json", `{"security": {"auth": {"selectedType": "gemini-api-key"}}, "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false}, "general": {"disableAutoUpdate": true, "disableUpdateNag": true}}`)
	env := p.env("GEMINI_API_KEY=fake-key", "GOOGLE_GEMINI_BASE_URL="+model.URL, "GEMINI_CLI_TRUST_WORKSPACE=true", "GEMINI_CLI_NO_RELAUNCH=true")
	return p.start(env, bin, "-p", prompt, "--yolo", "--model", "gemini-2.5-pro")
}

func geminiShell(cmd string) fakemodel.Turn {
	return fakemodel.Turn{Tool: "run_shell_command", Input: map[string]any{"command": cmd, "description": "run " + cmd}}
}

// TestGeminiWorker: what crew setup gemini writes works in the real
// Gemini CLI: the brief in the first request; a steer sent during a
// shell command in the next request, also when the command fails; a
// follow-up holds the first finish, and the second is allowed.
func TestGeminiWorker(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	model := fakemodel.Start(t, fakemodel.Gemini, workerTurns(geminiShell)...)
	a := p.gemini(model, "Work on your crew task.")
	followUpHoldsStop(t, model, a, steerDuringTools(t, p, model, ""))
}
