package realagent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crew-dev/crew/internal/fakemodel"
)

// gemini starts gemini -p in the project, set up by crew setup gemini
// for task t1, against model (GOOGLE_GEMINI_BASE_URL), with the folder
// trust crew setup says a headless worker needs.
func (p *project) gemini(model *fakemodel.Server, prompt string) *agentRun {
	p.t.Helper()
	p.crew("setup", "gemini", "--project", p.dir, "--run", "r1", "--task", "t1")
	return p.startGemini(model, prompt)
}

// startGemini starts gemini -p in the project as it is set up.
func (p *project) startGemini(model *fakemodel.Server, prompt string) *agentRun {
	p.t.Helper()
	bin := agentBin(p.t, "gemini")
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

// TestGeminiBriefAfterCompression: Gemini CLI compresses its history
// before a new user message (here the follow-up that holds its finish;
// within one prompt's tool calls it never does: its split point is the
// last user message that is no tool result) once an answer reported
// more than half its model's window (usageMetadata.promptTokenCount),
// with two generateContent calls of its own (summary and check). Its
// history then holds the summary, not the brief: crew's BeforeModel
// hook puts the brief back in the first request after the compression,
// once, and in each later one (Gemini compresses again before the
// next: the follow-up is a split point too), once.
func TestGeminiBriefAfterCompression(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	model := fakemodel.Start(t, fakemodel.Gemini, geminiShell("true"), fakemodel.Turn{Text: "Done."}, geminiShell("true"), fakemodel.Turn{Text: "Done, and gofmt run."})
	a := p.gemini(model, "Work on your crew task.")
	reqs := model.WaitMain(t, 1, time.Minute)
	if reqs[0].Count(briefLine) != 1 {
		t.Fatalf("the first request shows the brief %d times, want 1:\n%s", reqs[0].Count(briefLine), reqs[0].Body)
	}
	p.crew("follow-up", "t1", followText, "--run", "r1")
	model.PromptTokens(990_000)
	a.wait(t, 2*time.Minute)
	all := model.Requests()
	compressed := -1
	for i, r := range all {
		if !r.Main && strings.Contains(r.Path, ":generateContent") && r.Shows("state_snapshot") {
			compressed = i
			break
		}
	}
	if compressed < 0 {
		t.Fatalf("Gemini did not compress:\n%s", a.output())
	}
	var after []fakemodel.Request
	for _, r := range all[compressed+1:] {
		if r.Main {
			after = append(after, r)
		}
	}
	if len(after) < 2 {
		t.Fatalf("%d main requests after the compression, want 2", len(after))
	}
	if !after[0].Shows(followText) {
		t.Fatalf("the first request after the compression is not the follow-up's:\n%s", after[0].Body)
	}
	for i, r := range after {
		if n := r.Count(briefLine); n != 1 {
			t.Fatalf("request %d after the compression shows the brief %d times, want 1:\n%s", i+1, n, r.Body)
		}
	}
}

// TestGeminiWithoutCrew: with the crew that setup wrote gone, every hook
// (BeforeModel and BeforeAgent before each request among them) fails
// with exit 1, which Gemini CLI shows as a warning: the model still gets
// its requests, unchanged, and the turn ends.
func TestGeminiWithoutCrew(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	p.crew("setup", "gemini", "--project", p.dir, "--run", "r1", "--task", "t1")
	settings := filepath.Join(p.dir, ".gemini", "settings.json")
	b, err := os.ReadFile(settings)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "BeforeModel") {
		t.Fatalf("setup registered no BeforeModel hook:\n%s", b)
	}
	gone := filepath.Join(p.dir, "no-such-crew")
	p.write(settings, strings.ReplaceAll(string(b), crewBin, gone))
	model := fakemodel.Start(t, fakemodel.Gemini, geminiShell("true"), fakemodel.Turn{Text: "Done."})
	a := p.startGemini(model, "Work on your crew task.")
	a.wait(t, 2*time.Minute)
	reqs := model.Main()
	if len(reqs) != 2 || !reqs[1].Shows("functionResponse") || reqs[0].Shows(briefLine) {
		t.Fatalf("%d main requests, want 2 without the brief (the tool call's result in the second):\n%s", len(reqs), a.output())
	}
}
