//go:build unix

// Package examples holds no code: only the example workflow and scripts
// in this directory, and this test, which runs them so they cannot rot.
package examples

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// workflow is the part of a GitHub Actions workflow the test reads.
type workflow struct {
	Jobs map[string]struct {
		Env   map[string]string `yaml:"env"`
		Steps []step            `yaml:"steps"`
	} `yaml:"jobs"`
}

type step struct {
	Name string         `yaml:"name"`
	ID   string         `yaml:"id"`
	If   string         `yaml:"if"`
	Uses string         `yaml:"uses"`
	Run  string         `yaml:"run"`
	With map[string]any `yaml:"with"`
}

// crewBin is the crew built from this repository, in a directory of its own
// (it stands in for the workflow's install step).
var crewBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "crew-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	crewBin = filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-o", filepath.Join(crewBin, "crew"), "github.com/crew-dev/crew/cmd/crew")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build crew:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func readWorkflow(t *testing.T) ([]step, map[string]string) {
	t.Helper()
	data, err := os.ReadFile("github-actions.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatalf("github-actions.yml is not YAML: %v", err)
	}
	if len(wf.Jobs) != 1 {
		t.Fatalf("%d jobs, want 1", len(wf.Jobs))
	}
	for _, job := range wf.Jobs {
		return job.Steps, job.Env
	}
	return nil, nil
}

// The workflow has what the README promises: it installs crew, uploads
// .crew/ (hidden, so include-hidden-files) and writes the markdown report
// to the job summary even when the crew failed.
func TestWorkflowShape(t *testing.T) {
	steps, _ := readWorkflow(t)
	var install, summary, upload bool
	for _, s := range steps {
		switch {
		case s.ID == "install":
			install = strings.Contains(s.Run, "github.com/crew-dev/crew/cmd/crew")
		case strings.Contains(s.Run, "--format markdown >> \"$GITHUB_STEP_SUMMARY\""):
			summary = s.If == "always()"
		case strings.HasPrefix(s.Uses, "actions/upload-artifact@"):
			path, _ := s.With["path"].(string)
			upload = strings.Contains(path, ".crew/") && s.With["include-hidden-files"] == true && s.If == "always()"
		}
	}
	if !install || !summary || !upload {
		t.Fatalf("install step %v, summary written always %v, .crew/ uploaded always with hidden files %v", install, summary, upload)
	}
}

// stepResult is what running one step gave.
type stepResult struct {
	name    string
	ran     bool
	code    int
	output  string
	skipped string // why it did not run
}

// runWorkflow runs the workflow's run: steps in a fresh workspace holding
// a copy of examples/crew, as GitHub's runner would: bash -eo pipefail,
// the job's env (with ${{ github.run_id }} and run_attempt filled in), a
// step after a failure only when its if: is always(). uses: steps are
// GitHub's own actions and are not run; the install step is replaced by
// the crew built from this repository on PATH.
func runWorkflow(t *testing.T, extraEnv ...string) (dir string, results []stepResult) {
	t.Helper()
	steps, jobEnv := readWorkflow(t)
	dir = t.TempDir()
	copyDir(t, "crew", filepath.Join(dir, "examples", "crew"))
	// Something for the example workers to survey.
	writeFile(t, filepath.Join(dir, "main.go"), "package main\n\n// TODO: say hello\nfunc main() {}\n")
	writeFile(t, filepath.Join(dir, "README"), "FIXME: write me\n")
	t.Cleanup(func() { stopLeftovers(t, dir) })

	expr := regexp.MustCompile(`\$\{\{\s*([^}]*?)\s*\}\}`)
	fill := func(s string) string {
		return expr.ReplaceAllStringFunc(s, func(m string) string {
			switch expr.FindStringSubmatch(m)[1] {
			case "github.run_id":
				return "4242"
			case "github.run_attempt":
				return "1"
			}
			t.Fatalf("the test does not know the expression %s: teach it, so the step is tested as written", m)
			return ""
		})
	}
	env := append(os.Environ(),
		"PATH="+crewBin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"CI=true", "GITHUB_ACTIONS=true", "GITHUB_WORKSPACE="+dir, "RUNNER_TEMP="+t.TempDir(),
		"GITHUB_STEP_SUMMARY="+filepath.Join(dir, "step-summary.md"),
		"GITHUB_RUN_ID=4242", "GITHUB_RUN_ATTEMPT=1")
	for k, v := range jobEnv {
		env = append(env, k+"="+fill(v))
	}
	env = append(env, extraEnv...)

	failed := false
	for _, s := range steps {
		res := stepResult{name: s.Name}
		if s.Name == "" {
			res.name = s.Uses
		}
		switch {
		case s.If != "" && s.If != "always()":
			t.Fatalf("step %q: the test does not know the condition %q", res.name, s.If)
		case s.Uses != "":
			res.skipped = "a GitHub action"
		case s.ID == "install":
			res.skipped = "crew is built from this repository"
		case failed && s.If != "always()":
			res.skipped = "an earlier step failed"
		}
		if res.skipped != "" {
			results = append(results, res)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound, not a measurement
		cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", fill(s.Run))
		cmd.Dir, cmd.Env = dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.WaitDelay = 5 * time.Second // a background helper that kept the output open is a bug
		err := cmd.Run()
		cancel()
		res.ran, res.output = true, out.String()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			res.code = ee.ExitCode()
		case err != nil:
			t.Fatalf("step %q: %v\n%s", res.name, err, res.output)
		}
		if res.code != 0 {
			failed = true
		}
		t.Logf("step %q exited %d:\n%s", res.name, res.code, res.output)
		results = append(results, res)
	}
	return dir, results
}

func find(t *testing.T, results []stepResult, name string) stepResult {
	t.Helper()
	for _, r := range results {
		if r.name == name {
			return r
		}
	}
	t.Fatalf("no step %q", name)
	return stepResult{}
}

func TestWorkflowRunsACrew(t *testing.T) {
	dir, results := runWorkflow(t)
	for _, r := range results {
		if r.ran && r.code != 0 {
			t.Fatalf("step %q exited %d:\n%s", r.name, r.code, r.output)
		}
	}
	if w := find(t, results, "Wait for the crew"); !strings.Contains(w.output, "2/2 done") {
		t.Errorf("run wait printed:\n%s", w.output)
	}
	summary := readFile(t, filepath.Join(dir, "step-summary.md"))
	for _, want := range []string{
		"### crew run `ci-4242-1` — example crew: survey the repository",
		"**2/2 done** · leader `leader`",
		"| `inventory` | `surveyor` | ✅ completed |",
		"| `todos` | `surveyor` | ✅ completed |",
		"| 1 | check `test -f out/todos.txt && grep -q \"^# todos\" out/todos.txt` passed · ",
		"| question | 2 | 0 | 0 | 2 | 0 |",
		"```mermaid\nsequenceDiagram\n",
		"L-->>T2: response#58; Search every text file#59; one hit per line as path#58;",
		"T2->>L: report#58; ",
		"Note over T2: completed",
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("job summary lacks %q:\n%s", want, summary)
		}
	}
	suites := readJUnit(t, filepath.Join(dir, "crew-junit.xml"))
	if suites.Tests != 2 || suites.Failures != 0 || suites.Errors != 0 {
		t.Errorf("junit: %+v", suites)
	}
	// The workers did the work the leader asked for, and what the artifact
	// keeps is there: the run and the helpers' logs.
	if got := readFile(t, filepath.Join(dir, "out", "todos.txt")); !strings.Contains(got, "./main.go:3:// TODO: say hello") || !strings.Contains(got, "./README:1:FIXME: write me") {
		t.Errorf("out/todos.txt:\n%s", got)
	}
	for _, f := range []string{".crew/state/runs/ci-4242-1/events.jsonl", ".crew/logs/leader.log", ".crew/state/runs/ci-4242-1/workers/todos.log"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the artifact would lack %s: %v", f, err)
		}
	}
	// Each worker ran under crew spawn, which recorded its start and exit.
	events := readFile(t, filepath.Join(dir, ".crew/state/runs/ci-4242-1/events.jsonl"))
	if n, m := strings.Count(events, `"type":"worker.started"`), strings.Count(events, `"type":"worker.exited"`); n != 2 || m != 2 {
		t.Errorf("%d workers started and %d exited under crew spawn, want 2 and 2", n, m)
	}
	if log := readFile(t, filepath.Join(dir, ".crew/logs/leader.log")); strings.Count(log, "question from ") != 2 {
		t.Errorf("the leader answered %d questions:\n%s", strings.Count(log, "question from "), log)
	}
	if stop := find(t, results, "Stop the crew's helpers"); !strings.Contains(stop.output, "stopped leader") {
		t.Errorf("the leader's watcher was not stopped:\n%s", stop.output)
	}
}

// A task whose done-when check fails: the worker fails it, run wait exits
// 6 and fails the job, and the report still reaches the summary.
func TestWorkflowReportsAFailedCrew(t *testing.T) {
	dir, results := runWorkflow(t, "CREW_EXAMPLE_FAIL=todos")
	if w := find(t, results, "Wait for the crew"); w.code != 6 || !strings.Contains(w.output, "1 of 2 tasks did not complete") {
		t.Fatalf("run wait exited %d:\n%s", w.code, w.output)
	}
	for _, name := range []string{"Report", "Stop the crew's helpers"} {
		if r := find(t, results, name); !r.ran || r.code != 0 {
			t.Errorf("step %q after the failure: ran %v, exit %d\n%s", name, r.ran, r.code, r.output)
		}
	}
	summary := readFile(t, filepath.Join(dir, "step-summary.md"))
	if !strings.Contains(summary, "**2/2 done · 1 failed**") || !regexp.MustCompile("\\| `todos` \\| `surveyor` \\| ❌ failed \\| .* worker.sh failed \\(line \\d+, exit 3\\)").MatchString(summary) {
		t.Errorf("job summary:\n%s", summary)
	}
	suites := readJUnit(t, filepath.Join(dir, "crew-junit.xml"))
	if suites.Tests != 2 || suites.Failures != 1 {
		t.Errorf("junit: %+v", suites)
	}
	if log := readFile(t, filepath.Join(dir, ".crew/state/runs/ci-4242-1/workers/todos.log")); !strings.Contains(log, `task todos is not done: its check "test -f out/todos.txt`) {
		t.Errorf("the worker's log does not show the refused check:\n%s", log)
	}
}

type junitSuites struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
	Suites   []struct {
		Cases []struct {
			Name string `xml:"name,attr"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func readJUnit(t *testing.T, path string) junitSuites {
	t.Helper()
	var s junitSuites
	if err := xml.Unmarshal([]byte(readFile(t, path)), &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(s.Suites) != 1 || len(s.Suites[0].Cases) != 2 {
		t.Fatalf("%s: %+v", path, s)
	}
	return s
}

// stopLeftovers stops the helpers a failed test may have left running: the
// workers through crew run stop, the watcher by the pid leader.sh saved.
func stopLeftovers(t *testing.T, dir string) {
	stop := exec.Command(filepath.Join(crewBin, "crew"), "run", "stop", "--run", "ci-4242-1")
	stop.Dir = dir
	stop.Run() // nothing to stop, or no run made: either is fine here
	pids, _ := filepath.Glob(filepath.Join(dir, ".crew", "logs", "*.pid"))
	for _, f := range pids {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
