package realagent

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crew-dev/crew/internal/fakemodel"
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
		"ANTHROPIC_SMALL_FAST_MODEL=claude-haiku-4-5", "CLAUDE_CODE_SKIP_PROMPT_HISTORY=1", "ENABLE_TOOL_SEARCH=false")
	return p.start(env, bin, append([]string{"-p", "--allowedTools", "Bash", "--debug-file", p.home + "/claude-debug.log"}, args...)...)
}

func bash(cmd string) fakemodel.Turn {
	return fakemodel.Turn{Tool: "Bash", Input: map[string]any{"command": cmd, "description": "run " + cmd}}
}

// TestClaudeWorker: the brief in the first request; a steer sent during
// a tool call in the very next request, also when the tool fails; a
// follow-up blocks the first stop, and the second stop is allowed.
func TestClaudeWorker(t *testing.T) {
	t.Parallel()
	p := newProject(t)
	model := fakemodel.Start(t, fakemodel.Anthropic,
		bash("sleep 2"), bash("sleep 2; exit 3"), fakemodel.Turn{Text: "Done."}, fakemodel.Turn{Text: "Done, and gofmt run."})
	a := p.claude(model, "Work on your crew task.")
	reqs := model.WaitMain(t, 1, time.Minute)
	if !reqs[0].Shows("You are a crew worker: run r1") || !reqs[0].Shows("task t1") {
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
	// During the failing tool call: a steer, shown with its failure, and
	// a follow-up, which waits for the stop.
	failing, follow := "Also keep the old tests.", "When done, run gofmt."
	p.crew("steer", "t1", failing, "--run", "r1")
	p.crew("follow-up", "t1", follow, "--run", "r1")
	reqs = model.WaitMain(t, 3, time.Minute)
	if !reqs[2].Shows(failing) || !reqs[2].Shows("Exit code 3") {
		t.Fatalf("the steer sent during the failing tool call is not in the next request:\n%s", reqs[2].Body)
	}
	// The follow-up is shown once: at the stop it blocks, or (Claude Code
	// 2.1.332) before, when the wait hook's wake of the steer runs the
	// UserPromptSubmit hooks in the middle of the turn.
	reqs = model.WaitMain(t, 4, time.Minute)
	switch first := fakemodel.First(reqs, follow); {
	case reqs[3].Count(follow) != 1 || first < 2:
		t.Fatalf("the follow-up is not shown exactly once, at the failed tool's result or the blocked stop:\n%s", reqs[3].Body)
	case first == 2:
		t.Logf("the follow-up was shown at the failed tool's result, with the woken steer (UserPromptSubmit), not at the stop")
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
