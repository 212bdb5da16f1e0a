//go:build linux

package guarantee

// Guarantee 1 (docs/guarantees.md): an operation that returned success is on disk and
// survives kill -9 of any process.
//
// What this proves: SIGKILL ends a process at any instruction, including
// between its fsync of the log and its projection writes, or in the middle
// of those writes; what the process had written stays in the page cache,
// so this tests crew's write order and recovery, not the disk. A power
// loss (losing what was written but not fsynced) is simulated by
// TestPowerLoss on LazyFS (powerloss_test.go); neither proves a disk's own
// honesty about fsync(2).

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/crew-dev/crew/internal/proc"
)

// bodyRE matches every message body the kill test sends.
var bodyRE = regexp.MustCompile(`^(r\d+-w\d+-\d+|sync-\d+-[a-z]+)$`)

// killWriter is one writer helper process of a kill round, in its own
// process group (so SIGKILL to the group ends it and its crew child at the
// same instant).
type killWriter struct {
	cmd    *exec.Cmd
	record string
}

// killStats counts what the kill rounds hit, to show in the test log that
// the dangerous windows were reached.
type killStats struct {
	childKills, groupKills int // crew processes killed directly; writers killed with their crew
	ops                    int // operations that reported success
	tornLog, tornMailbox   int // rounds after which a torn last line was found
	projBehind             int // rounds after which projections lagged the log (killed after fsync)
	tasksBehind            int // rounds with 100 tasks after which tasks.json was behind and the projection mark said the rest
	temps                  int // hidden temp files left by killed processes (at the end)
}

// TestKill9 runs 50 rounds in which several writer processes, each running
// crew steer/report/ask/respond/inbox one after the other, are killed with
// SIGKILL at random moments, sometimes only their running crew process,
// sometimes the writer with it, while a reader process runs crew events in
// a loop. After every round: every operation that reported success is in
// the log exactly once with the right kind and task, seq is dense, crew
// events and the other readers exit 0 and never print a torn record; after
// the next operation every projection (mailbox files, mail tree with read
// flags, tasks.json) agrees with the log; at the end they equal a rebuild
// from the log alone. The second half of the rounds runs with 100 tasks
// in the run, where tasks.json is written only every 4 events and the
// projection mark says how far projections got between (docs/files.md,
// Snapshots).
func TestKill9(t *testing.T) {
	rounds := 50
	if testing.Short() {
		rounds = 10
	}
	dir := newRun(t, "r1", "t1", "t2", "t3")
	crew(t, dir, "task", "start", "t3", "--run", "r1")
	recDir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	slots := []string{
		"steer:t1,report:t1",
		"report:t2,steer:t2,inbox:t1",
		"ask:t3,respond:t3",
		"steer:t1,respond:t3,report:t2,ask:t3,inbox:t2",
	}
	watch, stopWatch := logWrites(t, dir, "r1")
	defer stopWatch()
	var (
		stats   killStats
		records []string
		nextW   int
	)
	for round := range rounds {
		if round == rounds/2 {
			for i := 4; i <= 100; i++ {
				crew(t, dir, "task", "add", fmt.Sprintf("t%d", i), "--run", "r1")
			}
		}
		// A SIGKILL lands between write(2) calls, never inside one, so a
		// crash mid-line (a power loss, or a write cut short) is put in
		// by hand: in some rounds the log or a mailbox file starts with a
		// torn last line, which readers must ignore and writers cut.
		switch round % 5 {
		case 1:
			appendBytes(t, filepath.Join(runDir(dir, "r1"), "events.jsonl"), `{"seq":99999,"type":"message.sent","message":{"body":"torn`)
		case 3:
			appendBytes(t, filepath.Join(runDir(dir, "r1"), "mailbox", []string{"steering.jsonl", "outbox.jsonl", "inbox.jsonl"}[round%3]), `{"id":"torn","seq":99999,"kind":"steer","body":"to`)
		}
		// Writers and a reader run while the test kills at random.
		stop := make(chan struct{})
		var readerErrs []string
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			readerErrs = readLoop(t, dir, bodyRE, stop)
		}()
		start := func(slot int) *killWriter {
			nextW++
			w := &killWriter{record: filepath.Join(recDir, fmt.Sprintf("w%d", nextW))}
			w.cmd = helperCmd(t, "writer", "W_DIR="+dir, "W_OPS="+slots[slot],
				fmt.Sprintf("W_PREFIX=r%d-w%d", round, nextW), "W_COUNT=0",
				"W_RECORD="+w.record, "W_FAIL="+filepath.Join(recDir, "fail"))
			w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := w.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			return w
		}
		var all []*killWriter
		live := make([]*killWriter, len(slots))
		for i := range live {
			live[i] = start(i)
			all = append(all, live[i])
		}
		deadline := time.Now().Add(time.Duration(200+rng.IntN(300)) * time.Millisecond)
		for time.Now().Before(deadline) {
			time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
			i := rng.IntN(len(live))
			switch r := rng.IntN(5); {
			case r < 2: // kill the running crew process only (mid-operation)
				stats.childKills += killChildren(live[i].cmd.Process.Pid)
			case r == 2: // kill the writers' crew processes just after one wrote to the log
				var kids []int
				for _, w := range live {
					kids = append(kids, children(w.cmd.Process.Pid)...)
				}
				if logWritten(watch, 50*time.Millisecond) {
					for _, pid := range kids {
						if syscall.Kill(pid, syscall.SIGKILL) == nil {
							stats.childKills++
						}
					}
				}
			case r == 3: // kill the writer and its crew process at once
				killGroups(live[i])
				stats.groupKills++
				live[i] = start(i)
				all = append(all, live[i])
			}
		}
		// On a loaded machine the writers may not have finished an
		// operation yet: let the round go on until one has (so every round
		// tests something acknowledged), however long the machine takes.
		waitForSuccess(t, all, time.Minute)
		// Every round ends with SIGKILL of every writer, whatever it was
		// doing; every other round, just after a write to the log, to hit
		// the window between a commit and its projections.
		if round%2 == 0 {
			logWritten(watch, 200*time.Millisecond)
		}
		killGroups(live...)
		stats.groupKills += len(live)
		close(stop)
		wg.Wait()
		for _, e := range readerErrs {
			t.Errorf("round %d: reader: %s", round, e)
		}
		if fails := readRecord(t, filepath.Join(recDir, "fail")); len(fails) > 0 {
			t.Fatalf("round %d: a writer's operation failed:\n%s", round, strings.Join(fails, "\n"))
		}
		for _, w := range all {
			rec := readRecord(t, w.record)
			stats.ops += len(rec)
			records = append(records, rec...)
		}

		// Right after the kills, before anything catches up.
		evs, torn := readLog(t, dir, "r1")
		if torn > 0 {
			stats.tornLog++
		}
		behind, tornMB := projectionState(t, dir, "r1", evs)
		if behind {
			stats.projBehind++
		}
		if tornMB {
			stats.tornMailbox++
		}
		cli := eventsCLI(t, dir, "r1")
		if len(cli) != len(evs) {
			t.Fatalf("round %d: crew events printed %d events, events.jsonl holds %d complete ones", round, len(cli), len(evs))
		}
		checkRecorded(t, records, messagesByBody(t, evs))
		for _, args := range [][]string{{"task", "list"}, {"pending"}, {"pending", "--task", "t1"}, {"outbox", "--unread"}} {
			res := runCrew(t, dir, append(args, "--json", "--run", "r1")...)
			if res.Code != 0 {
				t.Fatalf("round %d: crew %s after the kills: exit %d: %s", round, strings.Join(args, " "), res.Code, res.Stderr)
			}
			if bad := badJSONObjects(res.Stdout); bad != "" {
				t.Fatalf("round %d: crew %s printed a line that is not whole JSON: %q", round, strings.Join(args, " "), bad)
			}
		}

		// The next operation catches the projections up; one of each
		// mailbox file's kind, so each file's torn tail is cut.
		for _, op := range []string{"steer", "nudge", "report"} {
			body := fmt.Sprintf("sync-%d-%s", round, op)
			args := []string{op, "t2", body, "--run", "r1"}
			if op == "report" {
				args = []string{op, body, "--task", "t2", "--run", "r1"}
			}
			crew(t, dir, args...)
			records = append(records, op+":t2 "+body)
		}
		evs = eventsCLI(t, dir, "r1")
		checkRecorded(t, records, messagesByBody(t, evs))
		stats.temps = checkProjections(t, dir, "r1", evs)
		if round >= rounds/2 && tasksJSONSeq(t, dir, "r1") < evs[len(evs)-1].Seq {
			stats.tasksBehind++
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	checkRebuild(t, dir, "r1")
	t.Logf("%d rounds: %d operations reported success; killed %d crew processes directly and %d writers with theirs; "+
		"right after the kills: a torn log tail after %d rounds, a torn mailbox tail (put in by hand, not yet cut) after %d, "+
		"projections behind the log (killed between commit and projections) after %d; %d hidden temp files left by killed processes; "+
		"with 100 tasks, tasks.json behind the projection mark after the next operations in %d of %d rounds",
		rounds, stats.ops, stats.childKills, stats.groupKills, stats.tornLog, stats.tornMailbox, stats.projBehind, stats.temps,
		stats.tasksBehind, rounds-rounds/2)
	if stats.ops < rounds {
		t.Fatalf("only %d operations succeeded in %d rounds: the writers did not get to work", stats.ops, rounds)
	}
}

// waitForSuccess returns once one of the writers has recorded an
// operation that returned success, or after limit. It polls their record
// files: it paces the test's own processes, not the product.
func waitForSuccess(t *testing.T, writers []*killWriter, limit time.Duration) {
	t.Helper()
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		for _, w := range writers {
			if len(readRecord(t, w.record)) > 0 {
				return
			}
		}
	}
}

// killGroups sends SIGKILL to the writers' process groups (each writer and
// its crew process), all at once, then waits until no process of them is
// alive, so no write of a dying process can land after the test starts
// checking.
func killGroups(ws ...*killWriter) {
	for _, w := range ws {
		syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	}
	for _, w := range ws {
		w.cmd.Wait()
		for proc.GroupAlive(w.cmd.Process.Pid) {
			time.Sleep(time.Millisecond)
		}
	}
}

// logWrites returns a channel that receives a value at each write to the
// run's events.jsonl, sent only if a receiver is waiting at that moment
// (so a receive never sees a stale write), and a function that stops it.
func logWrites(t testing.TB, dir, runID string) (<-chan struct{}, func()) {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(filepath.Join(runDir(dir, runID), "events.jsonl")); err != nil {
		t.Fatal(err)
	}
	c := make(chan struct{})
	go func() {
		for {
			select {
			case e, ok := <-w.Events:
				if !ok {
					return
				}
				if e.Has(fsnotify.Write) {
					select {
					case c <- struct{}{}:
					default:
					}
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
			}
		}
	}()
	return c, func() { w.Close() }
}

// logWritten waits up to d for the next write to the log and reports
// whether one came.
func logWritten(writes <-chan struct{}, d time.Duration) bool {
	select {
	case <-writes:
		return true
	case <-time.After(d):
		return false
	}
}

// projectionState reports, right after a kill round, whether the
// projections are behind the log (neither tasks.json nor the projection
// mark reflects the last seq: a writer died after its fsync, before it
// finished its projections) and whether a mailbox file ends in a torn
// line (a writer died mid-write).
func projectionState(t testing.TB, dir, runID string, evs []logEvent) (behind, torn bool) {
	t.Helper()
	behind = max(tasksJSONSeq(t, dir, runID), readMark(t, runDir(dir, runID)).Seq) < evs[len(evs)-1].Seq
	for _, f := range []string{"inbox.jsonl", "outbox.jsonl", "steering.jsonl"} {
		data, _ := os.ReadFile(filepath.Join(runDir(dir, runID), "mailbox", f))
		if _, n := splitLines(data); n > 0 {
			torn = true
		}
	}
	return behind, torn
}

// tasksJSONSeq returns the seq of the state in the run's tasks.json (0
// when it cannot be read).
func tasksJSONSeq(t testing.TB, dir, runID string) int64 {
	t.Helper()
	var snap struct {
		Seq int64 `json:"seq"`
	}
	if data, err := os.ReadFile(filepath.Join(runDir(dir, runID), "tasks.json")); err == nil {
		json.Unmarshal(data, &snap)
	}
	return snap.Seq
}

// TestKill9Waiter: a worker blocked in crew ask --wait is killed with
// SIGKILL. Its question survives (the task stays waiting), and the
// restarted worker's crew await gets the leader's answer: one waiting
// as the answer is sent gets it, and so does one started after it.
func TestKill9Waiter(t *testing.T) {
	dir := newRun(t, "r1", "t1")
	crew(t, dir, "task", "start", "t1")
	writes, stopWatch := logWrites(t, dir, "r1")
	defer stopWatch()
	ask := exec.Command(crewBin, "ask", "Which database?", "--wait", "--task", "t1")
	ask.Dir, ask.Env = dir, crewEnv()
	if err := ask.Start(); err != nil {
		t.Fatal(err)
	}
	if !logWritten(writes, 30*time.Second) { // a hang, not a speed limit
		t.Fatal("crew ask wrote nothing")
	}
	// The question is committed once the log was written and the lock is
	// free; a write under the lock then shows ask is done committing.
	crew(t, dir, "nudge", "t1", "are you there?")
	ask.Process.Signal(syscall.SIGKILL)
	if err := ask.Wait(); err == nil || ask.ProcessState.ExitCode() != -1 {
		t.Fatalf("crew ask --wait ended on its own (%v) before it was killed", err)
	}

	var qid string
	for _, e := range eventsCLI(t, dir, "r1") {
		if e.Type == "task.waiting" && e.msg != nil && e.msg.Body == "Which database?" {
			qid = e.msg.ID
		}
	}
	if qid == "" {
		t.Fatal("the question of the killed worker is not in the log")
	}
	var task struct{ Status string }
	json.Unmarshal([]byte(crew(t, dir, "task", "show", "t1", "--json")), &task)
	if task.Status != "waiting" {
		t.Fatalf("after the worker was killed, task t1 is %q, want waiting", task.Status)
	}

	await := exec.Command(crewBin, "await", qid)
	await.Dir, await.Env = dir, crewEnv()
	var out strings.Builder
	await.Stdout = &out
	if err := await.Start(); err != nil {
		t.Fatal(err)
	}
	crew(t, dir, "respond", "t1", "Postgres.")
	if err := await.Wait(); err != nil || strings.TrimSpace(out.String()) != "Postgres." {
		t.Fatalf("crew await, started as the answer was sent: %v, printed %q; want Postgres.", err, out.String())
	}
	if got := strings.TrimSpace(crew(t, dir, "await", qid)); got != "Postgres." {
		t.Fatalf("crew await after the answer printed %q, want Postgres.", got)
	}
}

// TestKill9RunCreate: crew run create killed with SIGKILL at random
// moments leaves each run whole or absent: every run listed has a log
// that starts with run.created and readers exit 0 on it, and a run that is
// absent can be created afterwards under the same id.
func TestKill9RunCreate(t *testing.T) {
	dir := newRoot(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	const n = 20
	for i := range n {
		cmd := exec.Command(crewBin, "run", "create", "--id", fmt.Sprintf("k%d", i))
		cmd.Dir, cmd.Env = dir, crewEnv()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.IntN(15000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	var listed []struct{ ID string }
	for _, l := range strings.Split(strings.TrimSpace(crew(t, dir, "run", "list", "--json")), "\n") {
		if l == "" {
			continue
		}
		var m struct{ ID string }
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("crew run list --json printed %q", l)
		}
		listed = append(listed, m)
	}
	exists := map[string]bool{}
	for _, m := range listed {
		exists[m.ID] = true
		evs := eventsCLI(t, dir, m.ID)
		if len(evs) != 1 || evs[0].Type != "run.created" {
			t.Fatalf("run %s: log holds %d events (first %q), want run.created alone", m.ID, len(evs), evs[0].Type)
		}
		crew(t, dir, "task", "add", "t1", "--run", m.ID)
	}
	for i := range n {
		id := fmt.Sprintf("k%d", i)
		if !exists[id] {
			crew(t, dir, "run", "create", "--id", id)
			crew(t, dir, "task", "add", "t1", "--run", id)
		}
	}
	t.Logf("%d of %d runs were whole when their creator was killed; the rest were absent", len(listed), n)
}
