package guarantee

// Guarantee 3 (docs/guarantees.md: concurrent writers, and state changes that race; docs/state-machine.md): any number of processes may write to
// one run or one mailbox at once, and state changes race safely. Every
// writer here is a separate process running the built crew binary.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/crew-dev/crew/internal/natstest"
)

const (
	manyWriters = 8
	manyOps     = 100
)

// startWriters starts n writer helpers in dir, writer i running count
// operations ops(i) with bodies "w<i>-<n>", waits for them all, fails the
// test if any failed, and returns each writer's record of the operations
// that succeeded.
func startWriters(t *testing.T, dir string, n, count int, ops func(i int) string) [][]string {
	t.Helper()
	rec := t.TempDir()
	fail := filepath.Join(rec, "fail")
	var cmds []*cmdWait
	for i := range n {
		cmd := helperCmd(t, "writer", "W_DIR="+dir, "W_OPS="+ops(i), fmt.Sprintf("W_PREFIX=w%d", i),
			fmt.Sprintf("W_COUNT=%d", count), fmt.Sprintf("W_RECORD=%s/w%d", rec, i), "W_FAIL="+fail)
		out := new(strings.Builder)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, &cmdWait{cmd.Wait, out})
	}
	for i, c := range cmds {
		if err := c.wait(); err != nil {
			t.Errorf("writer %d: %v\n%s", i, err, c.out)
		}
	}
	if fails := readRecord(t, fail); len(fails) > 0 {
		t.Fatalf("%d operations failed, first ones:\n%s", len(fails), strings.Join(fails[:min(len(fails), 10)], "\n"))
	}
	records := make([][]string, n)
	for i := range n {
		records[i] = readRecord(t, fmt.Sprintf("%s/w%d", rec, i))
		if len(records[i]) != count {
			t.Fatalf("writer %d recorded %d successful operations, want %d", i, len(records[i]), count)
		}
	}
	return records
}

// startReader runs loop (a reader of crew processes, one after the other)
// in a goroutine until the returned channel is closed; the returned
// function waits for it and returns what it found wrong.
func startReader(t *testing.T, loop func(stop <-chan struct{}) []string) (chan struct{}, func() []string) {
	stop := make(chan struct{})
	done := make(chan []string)
	go func() { done <- loop(stop) }()
	return stop, func() []string { return <-done }
}

type cmdWait struct {
	wait func() error
	out  *strings.Builder
}

var writerBodyRE = regexp.MustCompile(`^w(\d+)-(\d+)$`)

// checkWriterOrder fails unless, for every writer, its bodies "w<i>-<n>"
// appear in ascending n in the sequence bodies (the order of the log, or of
// a listing).
func checkWriterOrder(t *testing.T, what string, bodies []string) {
	t.Helper()
	last := map[string]int{}
	for _, b := range bodies {
		m := writerBodyRE.FindStringSubmatch(b)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		if prev, ok := last[m[1]]; ok && n <= prev {
			t.Fatalf("%s: writer w%s's message %d comes after its message %d: the writer's order is not kept", what, m[1], n, prev)
		}
		last[m[1]] = n
	}
}

// TestManyWritersOneRun runs 8 processes that each send 100 messages (steer
// and report, alternately, to four tasks) with crew, all at once, to one
// run: every message is in the log exactly once, seq is dense, each
// writer's messages are in the order it sent them, the projections agree
// with the log and equal a rebuild from it, and no temporary file is left.
// The run holds 96 more tasks, pending, so that tasks.json is written only
// every 4 events and the projection mark says how far the projections got
// between (docs/files.md, Snapshots).
func TestManyWritersOneRun(t *testing.T) {
	ids := []string{"t1", "t2", "t3", "t4"}
	for i := 5; i <= 100; i++ {
		ids = append(ids, fmt.Sprintf("t%d", i))
	}
	dir := newRun(t, "r1", ids...)
	stop, readerDone := startReader(t, func(stop <-chan struct{}) []string {
		return readLoop(t, dir, writerBodyRE, stop)
	})
	records := startWriters(t, dir, manyWriters, manyOps, func(i int) string {
		task := fmt.Sprintf("t%d", i%4+1)
		return "steer:" + task + ",report:" + task
	})
	close(stop)
	for _, e := range readerDone() {
		t.Errorf("reader: %s", e)
	}
	evs := eventsCLI(t, dir, "r1")
	if raw, torn := readLog(t, dir, "r1"); len(raw) != len(evs) || torn != 0 {
		t.Fatalf("events.jsonl holds %d events and a torn tail of %d bytes; crew events printed %d", len(raw), torn, len(evs))
	}
	byBody := messagesByBody(t, evs) // fails on a duplicate
	var all []string
	for _, r := range records {
		all = append(all, r...)
	}
	checkRecorded(t, all, byBody)
	if len(byBody) != manyWriters*manyOps {
		t.Fatalf("the log holds %d messages, want %d", len(byBody), manyWriters*manyOps)
	}
	var bodies []string
	for _, e := range evs {
		if e.msg != nil {
			bodies = append(bodies, e.msg.Body)
		}
	}
	checkWriterOrder(t, "events.jsonl", bodies)
	if temps := checkProjections(t, dir, "r1", evs); temps != 0 {
		t.Errorf("%d temporary files left behind", temps)
	}
	checkRebuild(t, dir, "r1")
	if h := hiddenFiles(t, dir); len(h) > 0 {
		t.Errorf("temporary files left behind: %v", h)
	}
}

// TestManyWritersOneMailTree runs 8 processes that each deliver 100
// messages with crew mail send to one agent's mail tree, all at once: the
// agent has exactly 800 mail files, one per message (no two share a name,
// none lost, none duplicated), each writer's messages sort in the order it
// sent them (by file name, and in crew mail check), and no temporary file
// is left.
func TestManyWritersOneMailTree(t *testing.T) {
	dir := newRoot(t)
	crew(t, dir, "mail", "send", "--to", "bob", "--from", "setup", "--create-recipient", "hello")
	stop, readerDone := startReader(t, func(stop <-chan struct{}) []string {
		return mailCheckLoop(t, dir, "bob", regexp.MustCompile(`^(hello|w\d+-\d+)$`), stop)
	})
	startWriters(t, dir, manyWriters, manyOps, func(int) string { return "mail:bob" })
	close(stop)
	for _, e := range readerDone() {
		t.Errorf("reader: %s", e)
	}

	ents, err := os.ReadDir(mailDir(dir, "bob"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byBody := map[string]string{}
	ids := map[string]bool{}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			t.Errorf("temporary file left behind: %s", name)
			continue
		}
		if e.IsDir() { // archive/
			continue
		}
		data, err := os.ReadFile(filepath.Join(mailDir(dir, "bob"), name))
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ ID, From, Body string }
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("mail %s: %v: %q", name, err, data)
		}
		if !strings.HasSuffix(name, "-"+m.From+"-"+m.ID+".json") {
			t.Errorf("mail %s holds message %s from %s", name, m.ID, m.From)
		}
		if prev, ok := byBody[m.Body]; ok {
			t.Fatalf("message %q delivered twice: %s and %s", m.Body, prev, name)
		}
		if ids[m.ID] {
			t.Fatalf("message id %s used twice", m.ID)
		}
		byBody[m.Body], ids[m.ID] = name, true
		names = append(names, name)
	}
	for i := range manyWriters {
		for n := range manyOps {
			if _, ok := byBody[fmt.Sprintf("w%d-%d", i, n)]; !ok {
				t.Fatalf("message w%d-%d reported success but is not in the mail tree", i, n)
			}
		}
	}
	if want := manyWriters*manyOps + 1; len(names) != want {
		t.Fatalf("bob has %d mail files, want %d", len(names), want)
	}

	// Order: by file name (how Maildir-style readers sort), and as crew
	// lists them.
	sort.Strings(names)
	var bodies []string
	for _, n := range names {
		for b, name := range byBody {
			if name == n {
				bodies = append(bodies, b)
				break
			}
		}
	}
	checkWriterOrder(t, "file names", bodies)
	out := crew(t, dir, "mail", "check", "bob", "--json")
	bodies = bodies[:0]
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m struct{ Body string }
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("crew mail check --json: %v: %q", err, l)
		}
		bodies = append(bodies, m.Body)
	}
	if len(bodies) != manyWriters*manyOps+1 {
		t.Fatalf("crew mail check lists %d messages, want %d", len(bodies), manyWriters*manyOps+1)
	}
	checkWriterOrder(t, "crew mail check", bodies)
	if h := hiddenFiles(t, dir); len(h) > 0 {
		t.Errorf("temporary files left behind: %v", h)
	}
}

// race starts one crew process per argument list in dir, holds them all
// at the starting line (each is a helper waiting for a file) and releases
// them at once, and returns their results in order.
func race(t *testing.T, dir string, argss [][]string) []result {
	t.Helper()
	return raceIn(t, dir, nil, argss)
}

// raceIn is race with extra environment entries for every process
// ("CREW_STORE=...").
func raceIn(t *testing.T, dir string, env []string, argss [][]string) []result {
	t.Helper()
	goFile := filepath.Join(t.TempDir(), "go")
	type proc struct {
		wait           func() error
		stdout, stderr *strings.Builder
	}
	var procs []proc
	for _, args := range argss {
		cmd := helperCmd(t, "exec-on-go", append([]string{"GO_FILE=" + goFile, "GO_ARGS=" + strings.Join(args, "\x1f")}, env...)...)
		cmd.Dir = dir
		p := proc{wait: cmd.Wait, stdout: new(strings.Builder), stderr: new(strings.Builder)}
		cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := make([]result, len(procs))
	for i, p := range procs {
		err := p.wait()
		out[i] = result{Stdout: p.stdout.String(), Stderr: p.stderr.String()}
		if err != nil {
			out[i].Code = -1
			if ee, ok := err.(interface{ ExitCode() int }); ok {
				out[i].Code = ee.ExitCode()
			}
		}
	}
	return out
}

// oneWinner fails unless exactly one result has exit 0 and all others exit
// 3 with a message naming the task; it returns the winner's index.
func oneWinner(t *testing.T, what, taskID string, res []result) int {
	t.Helper()
	winner := -1
	for i, r := range res {
		switch r.Code {
		case 0:
			if winner >= 0 {
				t.Fatalf("%s: processes %d and %d both succeeded", what, winner, i)
			}
			winner = i
		case 3:
			if !strings.Contains(r.Stderr, "task "+taskID) {
				t.Errorf("%s: process %d: exit 3 without naming the task: %q", what, i, r.Stderr)
			}
		default:
			t.Fatalf("%s: process %d: exit %d, want 0 or 3: %s", what, i, r.Code, r.Stderr)
		}
	}
	if winner < 0 {
		t.Fatalf("%s: no process succeeded", what)
	}
	return winner
}

// countEvents returns how many events of type typ about task taskID the
// run's log holds after seq since.
func countEvents(evs []logEvent, since int64, typ, taskID string) []logEvent {
	var out []logEvent
	for _, e := range evs {
		if e.Seq > since && e.Type == typ && e.Task == taskID {
			out = append(out, e)
		}
	}
	return out
}

// TestRespondRace: in each of 5 rounds a worker asks, then 10 processes
// respond to the waiting task at the same instant: exactly one succeeds,
// the other nine exit 3 naming the task, and the log holds exactly one
// task.responded for the question, carrying the winner's body.
func TestRespondRace(t *testing.T) {
	dir := newRun(t, "r1", "t1")
	crew(t, dir, "task", "start", "t1")
	for round := range 5 {
		head := int64(len(eventsCLI(t, dir, "r1")))
		qid := strings.TrimSpace(crew(t, dir, "ask", fmt.Sprintf("question %d?", round), "--task", "t1"))
		var argss [][]string
		for i := range 10 {
			argss = append(argss, []string{"respond", "t1", fmt.Sprintf("answer %d from %d", round, i)})
		}
		res := race(t, dir, argss)
		w := oneWinner(t, fmt.Sprintf("round %d: respond", round), "t1", res)
		evs := eventsCLI(t, dir, "r1")
		got := countEvents(evs, head, "task.responded", "t1")
		if len(got) != 1 {
			t.Fatalf("round %d: %d task.responded events, want 1", round, len(got))
		}
		if m := got[0].msg; m.Body != argss[w][2] || m.ReplyTo != qid {
			t.Fatalf("round %d: the response in the log is %q replying to %s; the winner sent %q to %s", round, m.Body, m.ReplyTo, argss[w][2], qid)
		}
		checkProjections(t, dir, "r1", evs)
	}
}

// TestTransitionRaces: 10 processes apply a state change to one task at
// the same instant: exactly one succeeds and the rest exit 3, and the log
// holds exactly one event of the change. Cases: 10 × task complete of a
// running task (also of one with a done-when check, which every process
// runs before it commits), 10 × task start of a pending task, and 5 ×
// complete against 5 × fail (the task ends as the winner made it).
func TestTransitionRaces(t *testing.T) {
	dir := newRun(t, "r1", "c1", "c2", "c3", "s1", "m1", "m2", "m3")
	crew(t, dir, "task", "add", "d1", "--done-when", "true")
	for _, id := range []string{"c1", "c2", "c3", "m1", "m2", "m3", "d1"} {
		crew(t, dir, "task", "start", id)
	}
	type tc struct {
		task string
		args func(i int) []string
	}
	var cases []tc
	for _, id := range []string{"c1", "c2", "c3", "d1"} {
		cases = append(cases, tc{id, func(int) []string { return []string{"task", "complete", id} }})
	}
	cases = append(cases, tc{"s1", func(int) []string { return []string{"task", "start", "s1"} }})
	for _, id := range []string{"m1", "m2", "m3"} {
		cases = append(cases, tc{id, func(i int) []string {
			if i%2 == 0 {
				return []string{"task", "complete", id}
			}
			return []string{"task", "fail", id, "--reason", "race"}
		}})
	}
	typeOf := map[string]string{"complete": "task.completed", "start": "task.started", "fail": "task.failed"}
	for _, c := range cases {
		head := int64(len(eventsCLI(t, dir, "r1")))
		var argss [][]string
		for i := range 10 {
			argss = append(argss, c.args(i))
		}
		w := oneWinner(t, c.task, c.task, race(t, dir, argss))
		evs := eventsCLI(t, dir, "r1")
		var changes []logEvent
		for _, e := range evs[head:] {
			if e.Task == c.task && strings.HasPrefix(e.Type, "task.") {
				changes = append(changes, e)
			}
		}
		want := typeOf[argss[w][1]]
		if len(changes) != 1 || changes[0].Type != want {
			t.Fatalf("task %s: the log holds %d state changes after the race (%v), want one %s", c.task, len(changes), changes, want)
		}
		checkProjections(t, dir, "r1", evs)
	}
}

// TestInboxRace: 10 processes read one worker's inbox at the same instant
// (crew inbox marks what it shows delivered, a write): each exits 0 and
// shows all 5 messages, and each message is marked delivered exactly once
// in the log.
func TestInboxRace(t *testing.T) {
	dir := newRun(t, "r1", "t1")
	want := map[string]bool{}
	for i := range 5 {
		body := fmt.Sprintf("steer %d", i)
		crew(t, dir, "steer", "t1", body)
		want[body] = true
	}
	var argss [][]string
	for range 10 {
		argss = append(argss, []string{"inbox", "--task", "t1", "--json"})
	}
	for i, r := range race(t, dir, argss) {
		if r.Code != 0 {
			t.Fatalf("reader %d: exit %d: %s", i, r.Code, r.Stderr)
		}
		got := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			var m struct{ Body, Status string }
			if err := json.Unmarshal([]byte(l), &m); err != nil || m.Status != "delivered" {
				t.Fatalf("reader %d printed %q (%v); want a delivered message", i, l, err)
			}
			got[m.Body] = true
		}
		if len(got) != len(want) {
			t.Fatalf("reader %d saw %d messages, want %d", i, len(got), len(want))
		}
	}
	evs := eventsCLI(t, dir, "r1")
	delivered := map[string]int{}
	for _, e := range evs {
		if e.Type == "message.delivered" {
			for _, id := range e.MessageIDs {
				delivered[id]++
			}
		}
	}
	for _, e := range evs {
		if e.msg != nil && delivered[e.msg.ID] != 1 {
			t.Fatalf("message %q is marked delivered %d times, want once", e.msg.Body, delivered[e.msg.ID])
		}
	}
	checkProjections(t, dir, "r1", evs)
}

// TestCaseVariantsRace: processes creating, at the same instant, runs or
// mailboxes whose ids differ only in letter case (docs/concepts.md, Identifiers: they may not
// coexist): exactly one of each round is made, and the others exit 3.
func TestCaseVariantsRace(t *testing.T) {
	dir := newRun(t, "r1", "t1")
	variants := []string{"caseA1", "CASEA1", "Casea1", "cAsEa1", "casea1", "CaSeA1", "caSEa1", "CASEa1"}
	for round, argsOf := range []func(id string) []string{
		func(id string) []string { return []string{"run", "create", "--id", id} },
		func(id string) []string {
			return []string{"mail", "send", "--to", "box" + id, "--create-recipient", "hi"}
		},
	} {
		var argss [][]string
		for _, v := range variants {
			argss = append(argss, argsOf(v))
		}
		made := 0
		for i, r := range race(t, dir, argss) {
			switch r.Code {
			case 0:
				made++
			case 3:
			default:
				t.Fatalf("round %d: %v: exit %d, want 0 or 3: %s", round, argss[i], r.Code, r.Stderr)
			}
		}
		if made != 1 {
			t.Errorf("round %d: %d of %d case variants were made, want 1", round, made, len(variants))
		}
	}
	for _, sub := range []string{"runs", "mail"} {
		ents, err := os.ReadDir(filepath.Join(dir, ".crew", "state", sub))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			if e.IsDir() && strings.EqualFold(strings.TrimPrefix(e.Name(), "box"), "casea1") {
				names = append(names, e.Name())
			}
		}
		if len(names) != 1 {
			t.Errorf("state/%s holds %v, want one of the variants", sub, names)
		}
	}
}

// TestLeaderAndTaskAgentRace: a run created with leader X and a task added
// with agent X (in another run) at the same moment: mailboxes are shared
// across runs, so at most one of them succeeds (docs/concepts.md, Reserved
// names), and the other exits 3; never both.
func TestLeaderAndTaskAgentRace(t *testing.T) {
	leaderAndTaskAgentRace(t, newRun(t, "r1"), nil, 8)
}

// TestLeaderAndTaskAgentRaceNATS: the same on a NATS server, where the
// creators take turns through the agents lock of the CREW_LOCKS bucket.
func TestLeaderAndTaskAgentRaceNATS(t *testing.T) {
	srv := natstest.Server(t)
	dir := t.TempDir()
	env := []string{"CREW_STORE=" + srv.ClientURL()}
	if res := runCrewIn(t, dir, nil, env, "run", "create", "--id", "r1"); res.Code != 0 {
		t.Fatalf("crew run create: exit %d: %s", res.Code, res.Stderr)
	}
	leaderAndTaskAgentRace(t, dir, env, 16)
}

// leaderAndTaskAgentRace races, rounds times, crew run create --leader X
// against crew task add --agent X in run r1 of the store dir and env
// find.
func leaderAndTaskAgentRace(t *testing.T, dir string, env []string, rounds int) {
	for i := range rounds {
		agent := fmt.Sprintf("agent%d", i)
		res := raceIn(t, dir, env, [][]string{
			{"run", "create", "--id", fmt.Sprintf("lead%d", i), "--leader", agent},
			{"task", "add", fmt.Sprintf("task%d", i), "--agent", agent, "--run", "r1"},
		})
		switch {
		case res[0].Code == 0 && res[1].Code == 0:
			t.Fatalf("round %d: both the run led by %s and the task of %s were created", i, agent, agent)
		case res[0].Code == 0 && res[1].Code != exitConflict, res[1].Code == 0 && res[0].Code != exitConflict:
			t.Errorf("round %d: the loser exited %d and %d, want 3:\n%s%s", i, res[0].Code, res[1].Code, res[0].Stderr, res[1].Stderr)
		case res[0].Code != 0 && res[1].Code != 0:
			t.Errorf("round %d: neither succeeded:\n%s%s", i, res[0].Stderr, res[1].Stderr)
		}
	}
}
