//go:build unix

package main

// End-to-end tests with real processes: the crew binary, built once with
// `go build`, a leader (this test, invoking the binary) and three worker
// processes (scripts/demo-worker.sh, the workers of `make demo`) that work
// on a copy of the Go module in testdata/demo. The test drives ask,
// respond, steer, follow-up, nudge and complete to the end and then checks
// the run's event log. Every wait is a blocking read of a crew stream
// (`crew outbox --follow`) or a blocking crew command (`crew run wait`);
// the only clock is a generous bound that turns a hang into a failure.
//
// It runs twice: on the file store (everyone in one directory holding
// .crew), and on NATS JetStream (an embedded nats-server started by the
// test), where the leader and each worker have a directory of their own,
// as on different machines, share no file, and find each other only
// through CREW_STORE.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
)

// e2eBound turns a hang into a failure. It asserts nothing about speed.
const e2eBound = 3 * time.Minute

func TestEndToEnd(t *testing.T) {
	for _, tool := range []string{"go", "bash", "sed", "mkfifo"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("end-to-end tests need %s: %v", tool, err)
		}
	}
	t.Parallel()
	bin := buildCrew(t)
	t.Run("leader-and-three-workers", func(t *testing.T) { e2eLeaderAndWorkers(t, bin, e2eFileStore(t)) })
	t.Run("nats-separate-directories", func(t *testing.T) { e2eLeaderAndWorkers(t, bin, e2eNATSStore(t)) })
	t.Run("make-demo", func(t *testing.T) { e2eDemoScript(t, bin) })
}

// e2eEnv is the environment of every process of a test: the caller's,
// without any CREW_* variable or Go setting that could leak in, plus
// extra.
func e2eEnv(binDir string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "CREW_") || k == "GOFLAGS" || k == "GOWORK" || k == "PATH" || k == "NO_COLOR" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"), "GOWORK=off", "NO_COLOR=1")
	return append(env, extra...)
}

// e2eLeader runs the crew binary as the leader of run e2e.
type e2eLeader struct {
	t   *testing.T
	ctx context.Context
	bin string
	dir string // working directory: the module copy holding .crew
	env []string
}

// crew runs the binary and returns its stdout and exit code; stderr is
// logged.
func (l *e2eLeader) crew(args ...string) (string, int) {
	l.t.Helper()
	cmd := exec.CommandContext(l.ctx, l.bin, args...)
	cmd.Dir, cmd.Env = l.dir, l.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if stderr.Len() > 0 {
		l.t.Logf("crew %s: stderr: %s", strings.Join(args, " "), strings.TrimSpace(stderr.String()))
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), ee.ExitCode()
	}
	if err != nil {
		l.t.Fatalf("crew %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String(), 0
}

// must runs the binary and fails the test unless it exits 0.
func (l *e2eLeader) must(args ...string) string {
	l.t.Helper()
	out, code := l.crew(args...)
	if code != 0 {
		l.t.Fatalf("crew %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// e2eJSONLines decodes one JSON object per line into a T each.
func e2eJSONLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var vs []T
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("bad JSON line %q: %v", line, err)
		}
		vs = append(vs, v)
	}
	return vs
}

// e2eStore is where a run of e2eLeaderAndWorkers lives and where its
// processes work.
type e2eStore struct {
	leaderDir string                 // the leader's working directory
	workerDir func(id string) string // a worker's: a copy of testdata/demo
	env       []string               // what every process needs to find the run (CREW_DIR or CREW_STORE)
	init      bool                   // crew init first
	log       func(l *e2eLeader) []events.Event
	after     func(t *testing.T) // checks once the run is over
}

// e2eCopyDemo copies the demo module into a new directory.
func e2eCopyDemo(t *testing.T) string {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "testdata", "demo"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// e2eFileStore: the leader and the workers in one copy of the module,
// with the state root in it.
func e2eFileStore(t *testing.T) e2eStore {
	work := e2eCopyDemo(t)
	crewDir := filepath.Join(work, ".crew")
	return e2eStore{
		leaderDir: work,
		workerDir: func(string) string { return work },
		env:       []string{"CREW_DIR=" + crewDir},
		init:      true,
		log: func(*e2eLeader) []events.Event {
			return e2eReadLog(t, filepath.Join(crewDir, "state", "runs", "e2e", "events.jsonl"))
		},
	}
}

// e2eNATSStore: an embedded JetStream server; the leader in an empty
// directory, each worker in its own copy of the module; no .crew may
// appear anywhere.
func e2eNATSStore(t *testing.T) e2eStore {
	srv := natstest.Server(t)
	leader := t.TempDir()
	dirs := map[string]string{}
	return e2eStore{
		leaderDir: leader,
		workerDir: func(id string) string {
			dirs[id] = e2eCopyDemo(t)
			return dirs[id]
		},
		env: []string{"CREW_STORE=" + srv.ClientURL()},
		log: func(l *e2eLeader) []events.Event {
			out := l.must("events", "--json")
			log := e2eJSONLines[events.Event](t, out)
			for i, e := range log {
				if e.Seq != int64(i+1) {
					t.Fatalf("crew events line %d has seq %d: seq must be dense 1..n", i+1, e.Seq)
				}
			}
			return log
		},
		after: func(t *testing.T) {
			for _, dir := range append(slices.Collect(maps.Values(dirs)), leader) {
				filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
					if d != nil && d.Name() == ".crew" {
						t.Errorf("%s exists: a process used the file store", path)
					}
					return nil
				})
			}
		},
	}
}

func e2eLeaderAndWorkers(t *testing.T, bin string, store e2eStore) {
	ctx, cancel := context.WithTimeout(context.Background(), e2eBound)
	defer cancel()
	work := store.leaderDir
	l := &e2eLeader{t: t, ctx: ctx, bin: bin, dir: work,
		env: e2eEnv(filepath.Dir(bin), append(store.env, "CREW_RUN=e2e")...)}

	if store.init {
		l.must("init")
	}
	l.must("run", "create", "--id", "e2e", "--title", "end-to-end")
	l.must("task", "add", "vet", "--title", "go vet ./...")
	l.must("task", "add", "test", "--title", "go test ./...")
	l.must("task", "add", "notes", "--title", "write NOTES.md", "--done-when", "test -s NOTES.md")

	// The leader's ear: what workers send, as it arrives.
	follow := exec.CommandContext(ctx, bin, "outbox", "--follow", "--json")
	follow.Dir, follow.Env = work, l.env
	pipe, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		follow.Process.Kill()
		follow.Wait()
	}()
	outbox := bufio.NewReader(pipe)

	// Three real worker processes, identity in the environment.
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "demo-worker.sh"))
	if err != nil {
		t.Fatal(err)
	}
	workers := map[string]*exec.Cmd{}
	logs := map[string]*bytes.Buffer{}
	notesDir := ""
	for _, id := range []string{"vet", "test", "notes"} {
		w := exec.CommandContext(ctx, "bash", script)
		w.Dir = store.workerDir(id)
		if id == "notes" {
			notesDir = w.Dir
		}
		w.Env = e2eEnv(filepath.Dir(bin), append(store.env, "CREW_RUN=e2e", "CREW_TASK="+id, "CREW_DEMO_PACE=0")...)
		logs[id] = &bytes.Buffer{}
		w.Stdout, w.Stderr = logs[id], logs[id]
		w.WaitDelay = 10 * time.Second
		// Its own process group, so that a failing test stops the worker
		// together with the crew command it is blocked in.
		w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		w.Cancel = func() error { return syscall.Kill(-w.Process.Pid, syscall.SIGKILL) }
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		workers[id] = w
	}
	defer func() {
		for id, w := range workers {
			if w.ProcessState == nil {
				syscall.Kill(-w.Process.Pid, syscall.SIGKILL)
				w.Wait()
			}
			t.Logf("worker %s said:\n%s", id, logs[id])
		}
	}()

	// The leader's policy, as in scripts/demo-leader.sh: answer test
	// ("skip"), then steer notes and send it a follow-up, and only then
	// answer notes (so both reach notes before it can finish); then nudge
	// vet, the worker that said nothing; stop after three final reports.
	heard := map[string]bool{}
	questions := map[string]string{} // task -> question id
	var held, nudge string
	testSettled := false
	respondNotes := func() {
		l.must("respond", "notes", "Keep it short: no examples.")
		held = ""
		if heard["vet"] {
			t.Fatalf("vet spoke before it was nudged; the quiet worker is not quiet")
		}
		nudge = strings.TrimSpace(l.must("nudge", "vet"))
	}
	finals := 0
	for finals < 3 {
		line, err := outbox.ReadBytes('\n')
		if err != nil {
			t.Fatalf("outbox stream ended: %v (after %d final reports)", err, finals)
		}
		var m events.Message
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("outbox line %q: %v", line, err)
		}
		heard[m.Task] = true
		switch m.Kind {
		case events.KindQuestion:
			questions[m.Task] = m.ID
			// crew pending shows the waiting task with this very question.
			found := false
			for _, w := range e2eJSONLines[events.Message](t, l.must("pending", "--json")) {
				if w.Kind == events.KindQuestion && w.Task == m.Task && w.ID == m.ID {
					found = true
				}
			}
			if !found {
				t.Fatalf("crew pending does not show %s waiting on question %s", m.Task, m.ID)
			}
			switch m.Task {
			case "test":
				l.must("respond", "test", "Skip it, and say so in your report.")
				testSettled = true
				l.must("steer", "notes", "Add a Known issues section: TestReverseUnicode fails.")
				l.must("follow-up", "notes", "When NOTES.md is done, add how to run the tests.")
				if held != "" {
					respondNotes()
				}
			case "notes":
				if testSettled {
					respondNotes()
				} else {
					held = m.ID
				}
			default:
				t.Fatalf("unexpected question from %s: %q", m.Task, m.Body)
			}
		case events.KindReport:
			l.must("ack", m.ID)
			if strings.HasPrefix(m.Body, "done:") {
				finals++
			}
		default:
			t.Fatalf("unexpected %s in the outbox: %+v", m.Kind, m)
		}
	}

	if out, code := l.crew("run", "wait", "--timeout", e2eBound.String()); code != 0 {
		t.Fatalf("crew run wait: exit %d, want 0\n%s", code, out)
	}
	for id, w := range workers {
		if err := w.Wait(); err != nil {
			t.Errorf("worker %s: %v", id, err)
		}
	}

	// Nothing is left open for anyone.
	for _, who := range [][]string{{}, {"--task", "vet"}, {"--task", "test"}, {"--task", "notes"}} {
		if out := l.must(append([]string{"pending", "--json"}, who...)...); strings.TrimSpace(out) != "" {
			t.Errorf("crew pending %v: still open:\n%s", who, out)
		}
	}
	for _, tk := range e2eJSONLines[struct{ ID, Status string }](t, l.must("task", "list", "--json")) {
		if tk.Status != "completed" {
			t.Errorf("task %s is %s, want completed", tk.ID, tk.Status)
		}
	}
	notes, err := os.ReadFile(filepath.Join(notesDir, "NOTES.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## API", "## Known issues", "TestReverseUnicode fails", "## Running the tests"} {
		if !strings.Contains(string(notes), want) {
			t.Errorf("NOTES.md lacks %q (the steer and the follow-up must both be acted on):\n%s", want, notes)
		}
	}

	e2eCheckLog(t, store.log(l), questions, nudge)
	if store.after != nil {
		store.after(t)
	}
}

// e2eReadLog reads events.jsonl, which must be whole lines with seq
// 1..n.
func e2eReadLog(t *testing.T, path string) []events.Event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var log []events.Event
	for i, line := range strings.SplitAfter(string(data), "\n") {
		if line == "" {
			continue
		}
		if !strings.HasSuffix(line, "\n") {
			t.Fatalf("events.jsonl ends with an unterminated line %q", line)
		}
		e, err := events.Decode([]byte(strings.TrimSuffix(line, "\n")))
		if err != nil {
			t.Fatalf("events.jsonl line %d: %v", i+1, err)
		}
		if e.Seq != int64(i+1) {
			t.Fatalf("events.jsonl line %d has seq %d: seq must be dense 1..n", i+1, e.Seq)
		}
		log = append(log, e)
	}
	return log
}

// e2eCheckLog asserts the story in the run's event log.
func e2eCheckLog(t *testing.T, log []events.Event, questions map[string]string, nudgeID string) {
	t.Helper()
	sent := map[string]events.Event{} // message id -> the event that sent it
	for _, e := range log {
		if e.Message != nil {
			sent[e.Message.ID] = e
		}
	}
	// closedBy returns the seq of the first event of type typ by actor that
	// names message id, or 0.
	closedBy := func(typ, actor, id string) int64 {
		for _, e := range log {
			if e.Type == typ && e.Actor == actor && slices.Contains(e.MessageIDs, id) {
				return e.Seq
			}
		}
		return 0
	}
	// Anyone other than the recipient touching a message is a bug.
	for _, e := range log {
		for _, id := range e.MessageIDs {
			m := sent[id].Message
			if m == nil {
				t.Errorf("seq %d (%s) names message %s, which was never sent", e.Seq, e.Type, id)
				continue
			}
			want := m.To
			if m.Direction == events.Outbox {
				want = "leader"
			}
			if e.Actor != want {
				t.Errorf("seq %d: %s of %s %s by %s, but it was sent to %s", e.Seq, e.Type, m.Kind, id, e.Actor, want)
			}
		}
	}

	completed := map[string]int64{}
	for _, e := range log {
		if e.Type == events.TaskCompleted {
			completed[e.Task] = e.Seq
		}
	}
	for _, id := range []string{"vet", "test", "notes"} {
		if completed[id] == 0 {
			t.Errorf("task %s never completed", id)
		}
	}

	// Each question is answered by a response that names it (replyTo),
	// which its worker acknowledged.
	for task, q := range questions {
		qe, ok := sent[q]
		if !ok || qe.Type != events.TaskWaiting || qe.Task != task {
			t.Errorf("question %s of %s: sent by %+v, want a task.waiting event of %s", q, task, qe, task)
			continue
		}
		var answered bool
		for _, e := range log {
			if e.Type != events.TaskResponded || e.Message == nil || e.Message.ReplyTo != q {
				continue
			}
			answered = true
			if e.Task != task || e.From != "waiting" || e.To != "running" || e.Seq < qe.Seq {
				t.Errorf("response %s to %s's question: %+v", e.Message.ID, task, e)
			}
			if closedBy(events.MessageAcknowledged, task, e.Message.ID) == 0 {
				t.Errorf("%s never acknowledged the response %s", task, e.Message.ID)
			}
		}
		if !answered {
			t.Errorf("question %s of %s was never answered by a response naming it", q, task)
		}
	}
	if len(questions) != 2 {
		t.Errorf("questions asked: %v, want one from test and one from notes", questions)
	}

	// The steer and the follow-up reach notes, which has them delivered
	// and acknowledges them before it completes.
	for _, kind := range []string{events.KindSteer, events.KindFollowUp} {
		var found bool
		for _, e := range log {
			m := e.Message
			if m == nil || m.Kind != kind {
				continue
			}
			found = true
			if m.To != "notes" || m.Task != "notes" || m.From != "leader" {
				t.Errorf("%s %s goes from %s to %s, want leader to notes", kind, m.ID, m.From, m.To)
			}
			d := closedBy(events.MessageDelivered, "notes", m.ID)
			a := closedBy(events.MessageAcknowledged, "notes", m.ID)
			if d == 0 || a == 0 || !(e.Seq < d && d <= a && a < completed["notes"]) {
				t.Errorf("%s %s: sent at seq %d, delivered at %d, acknowledged at %d, notes completed at %d", kind, m.ID, e.Seq, d, a, completed["notes"])
			}
		}
		if !found {
			t.Errorf("no %s in the log", kind)
		}
	}

	// The nudge reaches vet, which says nothing before it and answers it
	// with a report, then completes.
	ne, ok := sent[nudgeID]
	if !ok || ne.Message.Kind != events.KindNudge || ne.Message.To != "vet" {
		t.Fatalf("nudge %s: %+v", nudgeID, ne)
	}
	if a := closedBy(events.MessageAcknowledged, "vet", nudgeID); a == 0 || a > completed["vet"] {
		t.Errorf("vet acknowledged the nudge at seq %d, completed at %d", a, completed["vet"])
	}
	var reply int64
	for _, e := range log {
		if m := e.Message; m != nil && m.Kind == events.KindReport && m.Task == "vet" {
			if e.Seq < ne.Seq {
				t.Errorf("vet reported at seq %d, before the nudge (seq %d): it was not quiet", e.Seq, ne.Seq)
			} else if reply == 0 {
				reply = e.Seq
			}
		}
	}
	if reply == 0 || reply > completed["vet"] {
		t.Errorf("vet answered the nudge (seq %d) with a report at seq %d, completed at %d", ne.Seq, reply, completed["vet"])
	}

	// Every report was read and acknowledged by the leader.
	for _, e := range log {
		if m := e.Message; m != nil && m.Kind == events.KindReport {
			if closedBy(events.MessageAcknowledged, "leader", m.ID) == 0 {
				t.Errorf("report %s from %s (%q) was never acknowledged by the leader", m.ID, m.Task, m.Body)
			}
		}
	}
}

// e2eDemoScript runs what `make demo` runs and checks that it ends well:
// exit 0, `crew run wait` exited 0, the files it points to exist, and no
// process it started outlives it (WaitDelay would cut the wait short).
func e2eDemoScript(t *testing.T, bin string) {
	ctx, cancel := context.WithTimeout(context.Background(), e2eBound)
	defer cancel()
	tmp := t.TempDir()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", "scripts", "demo.sh"), bin)
	cmd.Env = e2eEnv(filepath.Dir(bin), "TMPDIR="+tmp, "CREW_DEMO_PACE=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		t.Errorf("a process started by the demo outlived it (it kept the output open)")
	} else if err != nil {
		t.Fatalf("scripts/demo.sh: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		"test asks:", "crew pending:", "responds to test", "steers notes", "sends notes a follow-up",
		"vet is running and has not said a word", "safe point: nudged", "crew run wait exited 0",
		"Where it all is", "events.jsonl",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the transcript lacks %q:\n%s", want, text)
		}
	}
	runs, _ := filepath.Glob(filepath.Join(tmp, "crew-demo.*", ".crew", "state", "runs", "demo"))
	if len(runs) != 1 {
		t.Fatalf("demo run directory: found %v under %s", runs, tmp)
	}
	for _, f := range []string{"events.jsonl", "tasks.json", "mailbox/inbox.jsonl", "mailbox/outbox.jsonl", "mailbox/steering.jsonl"} {
		if _, err := os.Stat(filepath.Join(runs[0], f)); err != nil {
			t.Errorf("the demo points to %s: %v", f, err)
		}
	}
	// The transcript shows every event of the log exactly once.
	n := bytes.Count(e2eMust(os.ReadFile(filepath.Join(runs[0], "events.jsonl"))), []byte("\n"))
	for seq := 1; seq <= n; seq++ {
		if c := strings.Count(text, fmt.Sprintf("log #%-3d ", seq)); c != 1 {
			t.Errorf("log #%d appears %d times in the transcript, want once", seq, c)
		}
	}
	if strings.Contains(text, fmt.Sprintf("log #%-3d ", n+1)) {
		t.Errorf("the transcript shows an event past the end of the log (%d events)", n)
	}
	if t.Failed() {
		t.Logf("transcript:\n%s", text)
	}
}

func e2eMust[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Regression: CREW_JSON=1 turned errors into JSON (jsonRequested) but not
// the output itself, so a script that set it parsed human text. It now
// means --json for both, and CREW_JSON=0 (or an explicit --json=false)
// means human output for both.
func TestJSONFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	crew := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := Main(append([]string{"crew", "--dir", dir}, args...), strings.NewReader(""), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	if _, errOut, code := crew("init"); code != 0 {
		t.Fatalf("crew init: exit %d: %s", code, errOut)
	}
	crew("run", "create", "--id", "r1")
	crew("task", "add", "t1", "--run", "r1")

	t.Setenv("CREW_JSON", "1")
	out, _, code := crew("task", "list", "--run", "r1")
	if code != 0 || !strings.HasPrefix(out, `{"id":"t1"`) {
		t.Errorf("CREW_JSON=1 crew task list: exit %d, output %q, want one JSON object per task", code, out)
	}
	_, errOut, code := crew("task", "show", "nope", "--run", "r1")
	if code != exitNotFound || !strings.Contains(errOut, `{"error":{"code":"not_found"`) {
		t.Errorf("CREW_JSON=1 crew task show nope: exit %d, stderr %q, want exit 4 and a JSON error", code, errOut)
	}
	_, errOut, _ = crew("task", "show", "nope", "--run", "r1", "--json=false")
	if strings.Contains(errOut, `{"error"`) {
		t.Errorf("--json=false still wrote a JSON error: %q", errOut)
	}

	t.Setenv("CREW_JSON", "0")
	out, _, _ = crew("task", "list", "--run", "r1")
	if !strings.HasPrefix(out, "TASK") {
		t.Errorf("CREW_JSON=0 crew task list: %q, want the human table", out)
	}
	_, errOut, _ = crew("task", "show", "nope", "--run", "r1")
	if strings.Contains(errOut, `{"error"`) {
		t.Errorf("CREW_JSON=0 still wrote a JSON error: %q", errOut)
	}
}
