// Package realagent runs the real Claude Code, Codex and Gemini CLI
// against crew: each agent, installed by .ci/run (pinned npm versions)
// into the directory CREW_AGENTS names (default ~/.cache/crew-agents; its bin/ or node_modules/.bin/
// holds claude, codex and gemini), is pointed at a scripted fake of its
// vendor's model API (internal/fakemodel) and set up with crew setup,
// and the tests assert what the model was shown, request by request.
// A test skips, saying why, only when its agent's binary is absent.
// The PATH the agents run with has no crew: setup names crew by its
// absolute path, and that is what these tests rely on.
package realagent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crew-dev/crew/internal/fakemodel"
)

// crewBin is the crew built for the tests (TestMain).
var crewBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "realagent-crew-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	crewBin = filepath.Join(dir, "crew")
	if out, err := exec.Command("go", "build", "-o", crewBin, "github.com/crew-dev/crew/cmd/crew").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build crew: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// agentBin is the path of the real agent name, or the test is skipped
// saying why.
func agentBin(t *testing.T, name string) string {
	t.Helper()
	root := os.Getenv("CREW_AGENTS")
	if root == "" {
		// Where .ci/run installs them, for a run outside it.
		if home, err := os.UserHomeDir(); err == nil && fileExists(filepath.Join(home, ".cache", "crew-agents", "node_modules", ".bin", name)) {
			root = filepath.Join(home, ".cache", "crew-agents")
		}
	}
	if root == "" {
		t.Skipf("CREW_AGENTS is not set and ~/.cache/crew-agents has no %s: .ci/run installs the real agents (npm) and sets it", name)
	}
	for _, dir := range []string{filepath.Join(root, "node_modules", ".bin"), filepath.Join(root, "bin"), root} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
	}
	t.Skipf("no %s in %s (npm could not install it; see .ci/run's output)", name, root)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// project is a crew state root and an agent's project directory: run
// r1, its task t1 (started), and a HOME of its own.
type project struct {
	t         *testing.T
	dir, home string
	stdin     io.Reader // the next agent's standard input (none: /dev/null)
}

func newProject(t *testing.T) *project {
	t.Helper()
	p := &project{t: t, dir: t.TempDir(), home: t.TempDir()}
	// git: Codex and Gemini look for the project's root.
	if out, err := exec.Command("git", "init", "-q", p.dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	p.crew("init")
	p.crew("run", "create", "--id", "r1", "--title", "fix Reverse")
	p.crew("task", "add", "t1", "--run", "r1", "--title", "make Reverse keep runes whole")
	p.crew("task", "start", "--run", "r1", "--task", "t1")
	return p
}

// crew runs the built crew in the project and returns its stdout.
func (p *project) crew(args ...string) string {
	p.t.Helper()
	cmd := exec.Command(crewBin, append([]string{"--dir", p.dir}, args...)...)
	cmd.Dir = p.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		p.t.Fatalf("crew %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// write writes a file, making its directory.
func (p *project) write(path, content string) {
	p.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// env is the agents' environment: HOME of the project's own, a PATH
// with no crew on it (node and the system's tools only), no telemetry,
// no auto-update, no traffic but the model's, plus extra.
func (p *project) env(extra ...string) []string {
	node, _ := exec.LookPath("node")
	path := "/usr/local/bin:/usr/bin:/bin"
	if node != "" {
		path = filepath.Dir(node) + ":" + path
	}
	if strings.Contains(path, filepath.Dir(crewBin)) {
		p.t.Fatal("crew on the agents' PATH")
	}
	env := []string{"HOME=" + p.home, "PATH=" + path, "TERM=dumb", "LANG=C.UTF-8", "TMPDIR=" + os.TempDir(),
		"CREW_DIR=" + p.dir,
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"GEMINI_TELEMETRY_ENABLED=false", "NO_BROWSER=1", "CI=1"}
	return append(env, extra...)
}

// agentRun is a real agent running in the project.
type agentRun struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	done   chan error
	cancel context.CancelFunc
}

// start starts bin args in the project with env; the test ends it.
func (p *project) start(env []string, bin string, args ...string) *agentRun {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	a := &agentRun{done: make(chan error, 1), cancel: cancel}
	a.cmd = exec.CommandContext(ctx, bin, args...)
	a.cmd.Dir, a.cmd.Env, a.cmd.Stdin = p.dir, env, p.stdin
	a.cmd.Stdout, a.cmd.Stderr = lockedWriter{a}, lockedWriter{a}
	if err := a.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	go func() { a.done <- a.cmd.Wait() }()
	p.t.Cleanup(func() {
		cancel()
		<-a.done
		if p.t.Failed() {
			p.t.Logf("%s output:\n%s", filepath.Base(bin), a.output())
		}
	})
	return a
}

// waitOutput waits until the agent printed s, failing the test if it
// does not within timeout.
func (a *agentRun) waitOutput(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(a.output(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("agent did not print %q in %v:\n%s", s, timeout, a.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (a *agentRun) output() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out.String()
}

// wait waits for the agent to exit, failing the test if it does not
// within timeout.
func (a *agentRun) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case err := <-a.done:
		a.done <- err
		if err != nil {
			t.Logf("agent exited: %v", err)
		}
	case <-time.After(timeout):
		t.Fatalf("agent still running after %v:\n%s", timeout, a.output())
	}
}

type lockedWriter struct{ a *agentRun }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.a.mu.Lock()
	defer w.a.mu.Unlock()
	return w.a.out.Write(b)
}

// The worker scenario, the same for every agent: the model calls a
// shell tool for 2 s, then again with a command that fails, then answers
// (and answers again once a follow-up held its stop). The texts are the
// leader's.
const (
	briefLine   = "You are a crew worker: run r1"
	steerText   = "Switch to the rune-slice version."
	failingText = "Also keep the old tests."
	followText  = "When done, run gofmt."
)

// workerTurns is the worker scenario's script, shell being the agent's
// shell tool call.
func workerTurns(shell func(cmd string) fakemodel.Turn) []fakemodel.Turn {
	return []fakemodel.Turn{shell("sleep 2"), shell("sleep 2; exit 3"), {Text: "Done."}, {Text: "Done, and gofmt run."}}
}

// steerDuringTools plays the worker scenario up to the failed command's
// result: the first request must show the brief (and each of brief),
// the request after the first command the steer sent during it, and the
// one after the failing command the steer sent during that one (and
// failed, what the agent shows of the failure, when not ""). A
// follow-up is sent beside the second steer. It returns the three
// requests.
func steerDuringTools(t *testing.T, p *project, model *fakemodel.Server, failed string, brief ...string) []fakemodel.Request {
	t.Helper()
	reqs := model.WaitMain(t, 1, time.Minute)
	for _, s := range append([]string{briefLine}, brief...) {
		if !reqs[0].Shows(s) {
			t.Fatalf("the first request has no brief (%q):\n%s", s, reqs[0].Body)
		}
	}
	p.crew("steer", "t1", steerText, "--run", "r1")
	sent := time.Now()
	reqs = model.WaitMain(t, 2, time.Minute)
	if !reqs[1].Shows(steerText) {
		t.Fatalf("the steer sent during the tool call is not in the next request:\n%s", reqs[1].Body)
	}
	t.Logf("steer → next model request: %v (the request came %v after the 2 s tool call's)", reqs[1].At.Sub(sent).Round(time.Millisecond), (reqs[1].At.Sub(reqs[0].At) - 2*time.Second).Round(time.Millisecond))
	p.crew("steer", "t1", failingText, "--run", "r1")
	p.crew("follow-up", "t1", followText, "--run", "r1")
	reqs = model.WaitMain(t, 3, time.Minute)
	if !reqs[2].Shows(failingText) || (failed != "" && !reqs[2].Shows(failed)) {
		t.Fatalf("the steer sent during the failing tool call is not in the next request:\n%s", reqs[2].Body)
	}
	return reqs
}

// followUpHoldsStop ends the worker scenario of an agent whose follow-up
// waits for its stop: not shown at the failed command's result, shown
// once in the fourth request (the stop it held), and no request after
// it (the second stop allowed) once the agent a has exited.
func followUpHoldsStop(t *testing.T, model *fakemodel.Server, a *agentRun, reqs []fakemodel.Request) {
	t.Helper()
	if reqs[2].Shows(followText) {
		t.Fatal("the follow-up was shown at a tool result")
	}
	reqs = model.WaitMain(t, 4, time.Minute)
	if reqs[3].Count(followText) != 1 {
		t.Fatalf("the follow-up did not hold the stop:\n%s", reqs[3].Body)
	}
	a.wait(t, time.Minute)
	if n := len(model.Main()); n != 4 {
		t.Fatalf("%d main requests, want 4 (the second stop allowed)", n)
	}
}
