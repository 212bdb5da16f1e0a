package guarantee

// Shared helpers for the guarantee tests (docs/guarantees.md). TestMain builds the crew
// binary once into a temporary directory; every test drives that binary as
// real, separate processes, because the guarantees are about processes that
// crash and race, not goroutines pretending to be processes.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// crewBin is the absolute path of the crew binary built by TestMain.
var crewBin string

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(helperMain(h))
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "crew-guarantee-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "guarantee: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	bin, err := buildCrew(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "guarantee:", err)
		return 1
	}
	crewBin = bin
	return m.Run()
}

// buildCrew builds ./cmd/crew into dir and returns the binary's absolute
// path. It runs `go build` from the module root (the parent of this
// package's directory).
func buildCrew(dir string) (string, error) {
	bin := filepath.Join(dir, "crew")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/crew")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/crew: %v\n%s", err, out)
	}
	return bin, nil
}

// result is what one crew process did.
type result struct {
	Stdout, Stderr string
	Code           int // exit code; -1 if the process was killed by a signal
}

// crewEnv is the environment for crew processes: the test's environment
// without CREW_* variables (so a developer's shell cannot leak a run or a
// task into a test), plus extra ("KEY=value" entries).
func crewEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CREW_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// runCrewIn runs the crew binary once in working directory dir with args,
// stdin (may be nil) and extra environment entries ("CREW_RUN=r1"), and
// returns its output and exit code. It fails the test only if the process
// could not be started.
func runCrewIn(t testing.TB, dir string, stdin []byte, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(crewBin, args...)
	cmd.Dir = dir
	cmd.Env = crewEnv(env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
	default:
		t.Fatalf("start crew %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// runCrew runs `crew args...` in working directory dir (which holds, or is
// below, a .crew state root) and returns its output and exit code, whatever
// the code.
func runCrew(t testing.TB, dir string, args ...string) result {
	t.Helper()
	return runCrewIn(t, dir, nil, nil, args...)
}

// crew runs `crew args...` in dir, fails the test unless it exits 0, and
// returns its standard output.
func crew(t testing.TB, dir string, args ...string) string {
	t.Helper()
	res := runCrew(t, dir, args...)
	if res.Code != 0 {
		t.Fatalf("crew %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), res.Code, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

// newRoot makes a temporary directory with an initialised state root
// (`crew init`) and returns the directory (the parent of .crew).
func newRoot(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	crew(t, dir, "init")
	return dir
}

// newRun makes a state root with one run named runID (which becomes the
// latest run) and tasks taskIDs added, and returns the directory.
func newRun(t testing.TB, runID string, taskIDs ...string) string {
	t.Helper()
	dir := newRoot(t)
	crew(t, dir, "run", "create", "--id", runID)
	for _, id := range taskIDs {
		crew(t, dir, "task", "add", id, "--run", runID)
	}
	return dir
}

// runDir is the directory of run runID under dir's state root.
func runDir(dir, runID string) string {
	return filepath.Join(dir, ".crew", "state", "runs", runID)
}

// mailDir is the mail-tree directory of agent under dir's state root.
func mailDir(dir, agent string) string {
	return filepath.Join(dir, ".crew", "state", "mail", agent)
}

// Helper processes. The test binary doubles as a small driver program: run
// with GUARANTEE_HELPER set, TestMain runs the named helper instead of the
// tests. Helpers are how a test gets many independent processes that call
// crew and can be killed with SIGKILL at any moment, without depending on a
// shell.
const (
	helperEnv = "GUARANTEE_HELPER" // which helper: "writer" or "exec-on-go"
	binEnv    = "GUARANTEE_CREW"   // path of the crew binary
)

// helperCmd returns a command that runs the helper named name in a new
// process of the test binary, with the crew binary and extra ("KEY=value")
// in its environment. The caller starts it.
func helperCmd(t testing.TB, name string, extra ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(crewEnv(helperEnv+"="+name, binEnv+"="+crewBin), extra...)
	return cmd
}

func helperMain(name string) int {
	switch name {
	case "writer":
		return writerMain()
	case "exec-on-go":
		return execOnGoMain()
	}
	fmt.Fprintf(os.Stderr, "guarantee: unknown helper %q\n", name)
	return 2
}

// writerMain is the "writer" helper: it runs crew operations one after the
// other, each a separate crew process, and appends a line "OP BODY" to the
// file $W_RECORD only after crew exited 0, so every recorded operation is
// one that reported success. An exit code the operation does not allow
// (see writerOp) is appended to $W_FAIL with crew's stderr. A crew process
// killed by a signal is neither: it did not report anything.
//
// Environment: W_DIR (working directory, holding .crew), W_OPS (comma-separated
// ops, used in turn: "steer:TASK", "report:TASK", "ask:TASK",
// "respond:TASK", "inbox:TASK", "mail:AGENT"), W_PREFIX (bodies are PREFIX-N, N = 0, 1, …),
// W_COUNT (operations to run; 0 runs until killed), W_RECORD, W_FAIL.
func writerMain() int {
	bin := os.Getenv(binEnv)
	dir := os.Getenv("W_DIR")
	ops := strings.Split(os.Getenv("W_OPS"), ",")
	prefix := os.Getenv("W_PREFIX")
	count := 0
	fmt.Sscan(os.Getenv("W_COUNT"), &count)
	for n := 0; count == 0 || n < count; n++ {
		op := ops[n%len(ops)]
		body := fmt.Sprintf("%s-%d", prefix, n)
		args, allowed := writerOp(op, body)
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = crewEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			code = ee.ExitCode()
			if code < 0 { // killed by a signal (the test's SIGKILL)
				continue
			}
		default:
			appendLine(os.Getenv("W_FAIL"), fmt.Sprintf("%s %s: start: %v", op, body, err))
			return 1
		}
		if !strings.Contains(allowed, fmt.Sprint(code)) {
			appendLine(os.Getenv("W_FAIL"), fmt.Sprintf("%s %s: exit %d: %s", op, body, code, strings.TrimSpace(stderr.String())))
			continue
		}
		if code != 0 {
			continue
		}
		if strings.HasPrefix(op, "inbox:") {
			if bad := badJSONLines(stdout.String()); bad != "" {
				appendLine(os.Getenv("W_FAIL"), fmt.Sprintf("%s %s: printed a line that is not a whole message: %q", op, body, bad))
			}
			continue
		}
		appendLine(os.Getenv("W_RECORD"), op+" "+body)
	}
	return 0
}

// writerOp returns the crew arguments of one writer operation and the exit
// codes it may end with ("0", or "03" when a conflict is expected because
// other writers change the same task's state).
func writerOp(op, body string) (args []string, allowed string) {
	kind, task, _ := strings.Cut(op, ":")
	switch kind {
	case "steer":
		return []string{"steer", task, body}, "0"
	case "report":
		return []string{"report", body, "--task", task}, "0"
	case "ask":
		return []string{"ask", body, "--task", task}, "03"
	case "respond":
		return []string{"respond", task, body}, "03"
	case "inbox":
		return []string{"inbox", "--task", task, "--json"}, "0"
	case "mail": // task is the recipient agent; the sender is the body's writer prefix
		from := body[:strings.LastIndexByte(body, '-')]
		return []string{"mail", "send", "--to", task, "--from", from, body}, "0"
	}
	panic("unknown writer op " + op)
}

// badJSONLines returns the first line of out that is not a JSON object
// with a "body", or "".
func badJSONLines(out string) string {
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		var m struct {
			Body *string `json:"body"`
		}
		if json.Unmarshal([]byte(l), &m) != nil || m.Body == nil {
			return l
		}
	}
	return ""
}

// appendLine appends line and a newline to the file at path with one
// write(2) on an O_APPEND descriptor.
func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "guarantee:", err)
		os.Exit(1)
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		fmt.Fprintln(os.Stderr, "guarantee:", err)
		os.Exit(1)
	}
	f.Close()
}

// readRecord returns the complete lines of a record file written by
// appendLine (an unterminated last line, from a helper killed mid-write,
// is left out; a missing file has none).
func readRecord(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	} else {
		return nil
	}
	return strings.Split(s, "\n")
}

// execOnGoMain is the "exec-on-go" helper: it waits until the file $GO_FILE
// exists, then replaces itself with crew (execve(2)) run with the arguments
// in $GO_ARGS (separated by U+001F, the unit separator) in the working directory it was
// started in. Many of them started first and released at once by creating
// the file race as closely as processes can.
func execOnGoMain() int {
	file := os.Getenv("GO_FILE")
	args := strings.Split(os.Getenv("GO_ARGS"), "\x1f")
	for {
		if _, err := os.Stat(file); err == nil {
			break
		}
		time.Sleep(200 * time.Microsecond)
	}
	bin := os.Getenv(binEnv)
	// The helper's environment: crewEnv's, with the CREW_* entries the
	// test gave it (raceIn).
	err := syscall.Exec(bin, append([]string{bin}, args...), os.Environ())
	fmt.Fprintln(os.Stderr, "guarantee: exec crew:", err)
	return 1
}
