package realagent

import (
	"testing"
	"time"

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
	model := fakemodel.Start(t, fakemodel.Gemini,
		geminiShell("sleep 2"), geminiShell("sleep 2; exit 3"), fakemodel.Turn{Text: "Done."}, fakemodel.Turn{Text: "Done, and gofmt run."})
	a := p.gemini(model, "Work on your crew task.")
	reqs := model.WaitMain(t, 1, time.Minute)
	if !reqs[0].Shows("You are a crew worker: run r1") {
		t.Fatalf("the first request has no brief:\n%s", reqs[0].Body)
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
		t.Fatalf("the follow-up did not hold the finish:\n%s", reqs[3].Body)
	}
	a.wait(t, time.Minute)
	if n := len(model.Main()); n != 4 {
		t.Fatalf("%d main requests, want 4 (the second finish allowed)", n)
	}
}
