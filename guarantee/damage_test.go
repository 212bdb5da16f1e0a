package guarantee

// Guarantee 4 of docs/guarantees.md (issue 3, part 5): damage in the middle of a log.
// A line that is not an event, or a seq gap, is reported with its file and
// line (or seq) on stderr and skipped; readers print what they can and exit
// 7, and pending never says "nothing open" when it could not read
// everything. crew repair moves the damaged bytes into a quarantine file
// beside the log (nothing is deleted), logs log.repaired and rebuilds every
// projection, after which reads exit 0. Projections that are missing or
// corrupt are rebuilt from the log without the user doing anything.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// exitDamaged is the exit code for a damaged log (docs/cli.md, Exit codes).
const exitDamaged = 7

// damageRun makes run r1 with tasks t1 and t2 and a little traffic: t1 is
// waiting on a question (seq 5), t2 has a steer (seq 6) and t2 sent an
// urgent report (seq 7). It returns the directory and the question's id.
func damageRun(t *testing.T) (dir, question string) {
	t.Helper()
	dir = newRun(t, "r1", "t1", "t2")
	crew(t, dir, "task", "start", "t1", "--run", "r1")                                                // seq 4
	question = strings.TrimSpace(crew(t, dir, "ask", "Which DB?", "--run", "r1", "--task", "t1"))     // seq 5
	crew(t, dir, "steer", "t2", "focus on the parser", "--run", "r1")                                 // seq 6
	crew(t, dir, "report", "parser half done", "--priority", "urgent", "--run", "r1", "--task", "t2") // seq 7
	return dir, question
}

// logLines returns the lines of a JSONL file, each without its '\n'.
func logLines(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	var out [][]byte
	for _, l := range lines {
		if len(l) > 0 {
			out = append(out, bytes.TrimSuffix(l, []byte("\n")))
		}
	}
	return out
}

// writeLines writes lines to path, each followed by '\n'.
func writeLines(t *testing.T, path string, lines [][]byte) {
	t.Helper()
	var buf []byte
	for _, l := range lines {
		buf = append(buf, l...)
		buf = append(buf, '\n')
	}
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		t.Fatal(err)
	}
}

// appendLines appends lines (each followed by '\n') to path, as a foreign
// writer would.
func appendLines(t *testing.T, path string, lines ...[]byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.Write(append(append([]byte(nil), l...), '\n')); err != nil {
			t.Fatal(err)
		}
	}
}

// logSeqs returns the seq of every line of the log at path that decodes,
// in file order.
func logSeqs(t *testing.T, path string) []int64 {
	t.Helper()
	var seqs []int64
	for _, l := range logLines(t, path) {
		var e struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal(l, &e) == nil && e.Seq > 0 {
			seqs = append(seqs, e.Seq)
		}
	}
	return seqs
}

// assertDenseLog fails unless every line of the log at path is an event
// and their seqs are 1, 2, … n; it returns n.
func assertDenseLog(t *testing.T, path string) int64 {
	t.Helper()
	lines := logLines(t, path)
	seqs := logSeqs(t, path)
	if len(seqs) != len(lines) {
		t.Fatalf("%s: %d lines but %d readable events", path, len(lines), len(seqs))
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("%s: line %d has seq %d, want %d (seqs %v)", path, i+1, s, i+1, seqs)
		}
	}
	return int64(len(seqs))
}

// jsonRecords decodes one JSON object per line of out.
func jsonRecords(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("output line is not JSON: %q: %v", l, err)
		}
		recs = append(recs, m)
	}
	return recs
}

// wantDamaged fails unless res exited 7 and its stderr contains every one
// of want.
func wantDamaged(t *testing.T, what string, res result, want ...string) {
	t.Helper()
	if res.Code != exitDamaged {
		t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, res.Code, exitDamaged, res.Stdout, res.Stderr)
		return
	}
	for _, w := range want {
		if !strings.Contains(res.Stderr, w) {
			t.Errorf("%s: stderr does not name %q:\n%s", what, w, res.Stderr)
		}
	}
}

// TestDamagedLineIsReportedAndSkipped: a line that is not JSON in the
// middle of the log (here written by a foreign writer, past the last
// snapshot) is named by file and line on stderr by every reader, which
// still print everything else and exit 7; pending does not claim that
// nothing is open.
func TestDamagedLineIsReportedAndSkipped(t *testing.T) {
	dir, question := damageRun(t)
	logPath := filepath.Join(runDir(dir, "r1"), "events.jsonl")
	// Line 8 is torn garbage; line 9 is a good event with seq 8 after it.
	appendLines(t, logPath,
		[]byte(`{"seq":8,"at":"2026-11-29T21:04:05.123Z","type":"task.sta`),
		[]byte(`{"seq":8,"at":"2026-11-29T21:04:06.000Z","type":"task.started","run":"r1","task":"t2","actor":"t2","from":"pending","to":"running"}`))

	res := runCrew(t, dir, "events", "--json", "--run", "r1")
	wantDamaged(t, "events", res, "events.jsonl:line 8")
	var seqs []float64
	for _, r := range jsonRecords(t, res.Stdout) {
		seqs = append(seqs, r["seq"].(float64))
	}
	if want := []float64{1, 2, 3, 4, 5, 6, 7, 8}; !equalFloats(seqs, want) {
		t.Errorf("events printed seqs %v, want %v (everything readable)", seqs, want)
	}

	res = runCrew(t, dir, "pending", "--run", "r1")
	wantDamaged(t, "pending", res, "events.jsonl:", "expected seq 8")
	if !strings.Contains(res.Stdout, question) || !strings.Contains(res.Stdout, "parser half done") {
		t.Errorf("pending did not print what it could read (the open question and the urgent report):\n%s", res.Stdout)
	}
	if strings.Contains(res.Stdout, "nothing open") {
		t.Errorf("pending said nothing is open on a damaged log:\n%s", res.Stdout)
	}

	res = runCrew(t, dir, "pending", "--run", "r1", "--task", "t2", "--json")
	wantDamaged(t, "pending --task t2", res, "events.jsonl:", "expected seq 8")
	if len(jsonRecords(t, res.Stdout)) != 1 {
		t.Errorf("pending --task t2 should list the steer:\n%s", res.Stdout)
	}

	res = runCrew(t, dir, "task", "list", "--json", "--run", "r1")
	wantDamaged(t, "task list", res, "events.jsonl:", "expected seq 8")
	if got := len(jsonRecords(t, res.Stdout)); got != 2 {
		t.Errorf("task list printed %d tasks, want 2", got)
	}

	res = runCrew(t, dir, "inbox", "--json", "--run", "r1", "--task", "t2")
	wantDamaged(t, "inbox", res, "events.jsonl:", "expected seq 8")
	if recs := jsonRecords(t, res.Stdout); len(recs) != 1 || recs[0]["body"] != "focus on the parser" {
		t.Errorf("inbox did not print the steer:\n%s", res.Stdout)
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSeqGapIsReported: a log whose seqs jump (a line lost) is reported
// with the seq that is missing; readers print the rest and exit 7.
func TestSeqGapIsReported(t *testing.T) {
	dir, _ := damageRun(t)
	logPath := filepath.Join(runDir(dir, "r1"), "events.jsonl")
	appendLines(t, logPath,
		[]byte(`{"seq":9,"at":"2026-11-29T21:04:06.000Z","type":"task.started","run":"r1","task":"t2","actor":"t2","from":"pending","to":"running"}`))

	res := runCrew(t, dir, "events", "--run", "r1")
	wantDamaged(t, "events", res, "events.jsonl", "expected seq 8", "found seq 9")
	if !strings.Contains(res.Stdout, "task.started") || strings.Count(res.Stdout, "\n") != 8 {
		t.Errorf("events should print the 8 events it can read:\n%s", res.Stdout)
	}
	res = runCrew(t, dir, "pending", "--run", "r1", "--task", "t1")
	wantDamaged(t, "pending --task t1", res, "expected seq 8")
	if strings.Contains(res.Stdout, "nothing open") {
		t.Errorf("pending said nothing is open on a log with a gap:\n%s", res.Stdout)
	}
	res = runCrew(t, dir, "task", "show", "t2", "--json", "--run", "r1")
	wantDamaged(t, "task show", res, "expected seq 8")
	res = runCrew(t, dir, "run", "show", "r1", "--json")
	wantDamaged(t, "run show", res, "expected seq 8")
	res = runCrew(t, dir, "run", "list")
	wantDamaged(t, "run list", res, "run r1", "expected seq 8")
	if !strings.Contains(res.Stdout, "r1") {
		t.Errorf("run list did not list the damaged run:\n%s", res.Stdout)
	}
}

// TestPendingOnDamagedLogNeverSaysNothingOpen: even when nothing readable
// is open for the reader, a damaged log makes pending exit 7 instead of
// printing "nothing open" (the unreadable line could have been the message
// it is waiting for).
func TestPendingOnDamagedLogNeverSaysNothingOpen(t *testing.T) {
	dir := newRun(t, "r1", "t1")
	logPath := filepath.Join(runDir(dir, "r1"), "events.jsonl")
	if out := crew(t, dir, "pending", "--run", "r1", "--task", "t1"); !strings.Contains(out, "nothing open") {
		t.Fatalf("healthy run: pending should say nothing open, said %q", out)
	}
	appendLines(t, logPath, []byte(`{"seq":3,"type":"message.sent","message":{"body":"\xff`), []byte(`garbage`))
	for _, args := range [][]string{
		{"pending", "--run", "r1", "--task", "t1"},
		{"pending", "--run", "r1"},
		{"pending", "--run", "r1", "--json"},
	} {
		res := runCrew(t, dir, args...)
		wantDamaged(t, strings.Join(args, " "), res, "events.jsonl:", "expected seq 3")
		if strings.Contains(res.Stdout, "nothing open") {
			t.Errorf("%s said nothing open on a damaged log", strings.Join(args, " "))
		}
	}
}

// TestDamageOutlivesTheSnapshot: once a writer has replayed over damage and
// moved tasks.json past it, readers that start from tasks.json still exit
// 7 (the snapshot remembers the damage it skipped), until crew repair.
func TestDamageOutlivesTheSnapshot(t *testing.T) {
	dir, _ := damageRun(t)
	rd := runDir(dir, "r1")
	logPath := filepath.Join(rd, "events.jsonl")
	appendLines(t, logPath,
		[]byte(`not json at all`),
		[]byte(`{"seq":8,"at":"2026-11-29T21:04:06.000Z","type":"task.started","run":"r1","task":"t2","actor":"t2","from":"pending","to":"running"}`))
	// A writer commits after the damage: the snapshot now lies past it.
	crew(t, dir, "steer", "t2", "after the damage", "--run", "r1")
	var snap struct {
		Seq int64 `json:"seq"`
	}
	data, err := os.ReadFile(filepath.Join(rd, "tasks.json"))
	if err != nil || json.Unmarshal(data, &snap) != nil || snap.Seq != 9 {
		t.Fatalf("tasks.json should reflect seq 9 after the steer: %s (%v)", data, err)
	}
	res := runCrew(t, dir, "pending", "--run", "r1", "--task", "t2")
	wantDamaged(t, "pending after the snapshot moved past the damage", res, "events.jsonl:", "expected seq 8")
	if !strings.Contains(res.Stdout, "after the damage") {
		t.Errorf("pending should still print what it read:\n%s", res.Stdout)
	}
	res = runCrew(t, dir, "task", "list", "--run", "r1")
	wantDamaged(t, "task list after the snapshot moved past the damage", res, "events.jsonl:", "expected seq 8")

	crew(t, dir, "repair", "r1")
	for _, args := range [][]string{{"pending", "--run", "r1", "--task", "t2"}, {"task", "list", "--run", "r1"}, {"events", "--run", "r1"}} {
		if res := runCrew(t, dir, args...); res.Code != 0 {
			t.Errorf("after repair, %s: exit %d\n%s", strings.Join(args, " "), res.Code, res.Stderr)
		}
	}
}

// TestRepairQuarantinesExactBytes: crew repair moves a damaged middle line
// and a torn tail, byte for byte, into a quarantine file beside the log,
// fills the lost seq, appends log.repaired naming the quarantine file and
// what was lost, keeps every good line and its seq, rebuilds tasks.json and
// the mailbox files, and afterwards every reader exits 0 and writers go on
// with dense seqs.
func TestRepairQuarantinesExactBytes(t *testing.T) {
	dir, question := damageRun(t)
	rd := runDir(dir, "r1")
	logPath := filepath.Join(rd, "events.jsonl")
	lines := logLines(t, logPath)
	good := append([][]byte(nil), lines...)
	// Damage the steer (line 6) in place: bytes that are not JSON, with
	// invalid UTF-8 and a NUL in them, which must survive exactly.
	bad := []byte("{\"seq\":6,\"type\":\"message.sent\",\x00\xff\xfe garbage }}")
	lines[5] = bad
	writeLines(t, logPath, lines)
	torn := []byte(`{"seq":8,"at":"2026-11-29T21:04:06.000Z","type":"task.sta`)
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(torn)
	f.Close()
	// The snapshot was written after seq 7: remove it, so the damage is
	// met on the way (a damage the snapshot already covers is found by
	// events and repair, which read the whole log).
	os.Remove(filepath.Join(rd, "tasks.json"))
	wantDamaged(t, "pending before repair", runCrew(t, dir, "pending", "--run", "r1"), "events.jsonl:line 6", "expected seq 6")
	wantDamaged(t, "events before repair", runCrew(t, dir, "events", "--run", "r1"), "events.jsonl:line 6")

	out := crew(t, dir, "repair", "r1", "--json")
	var rep struct {
		Quarantine  string  `json:"quarantine"`
		LostSeqs    []int64 `json:"lostSeqs"`
		RepairedSeq int64   `json:"repairedSeq"`
		TornBytes   int64   `json:"tornBytes"`
		Damaged     []string
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("repair --json: %v\n%s", err, out)
	}
	if filepath.Dir(rep.Quarantine) != rd || !strings.HasPrefix(filepath.Base(rep.Quarantine), "events.jsonl.quarantine-") {
		t.Errorf("quarantine file %q is not beside the log in %s", rep.Quarantine, rd)
	}
	q, err := os.ReadFile(rep.Quarantine)
	if err != nil {
		t.Fatalf("quarantine file: %v", err)
	}
	if !bytes.Contains(q, append(append([]byte("\n"), bad...), '\n')) {
		t.Errorf("quarantine file does not hold the damaged line's exact bytes:\n%q", q)
	}
	if !bytes.Contains(q, append([]byte("\n"), torn...)) {
		t.Errorf("quarantine file does not hold the torn tail's exact bytes:\n%q", q)
	}
	if len(rep.LostSeqs) != 1 || rep.LostSeqs[0] != 6 || rep.TornBytes != int64(len(torn)) {
		t.Errorf("repair report: lost %v, torn %d bytes; want lost [6], torn %d", rep.LostSeqs, rep.TornBytes, len(torn))
	}

	// The log: every good line kept byte for byte with its seq, seq 6
	// filled, log.repaired last, seqs dense.
	n := assertDenseLog(t, logPath)
	after := logLines(t, logPath)
	for i, l := range good {
		if i == 5 {
			continue
		}
		if !bytes.Equal(after[i], l) {
			t.Errorf("repair changed good line %d:\n got %s\nwant %s", i+1, after[i], l)
		}
	}
	var last struct {
		Type string `json:"type"`
		Data struct {
			Quarantine string   `json:"quarantine"`
			LostSeqs   []int64  `json:"lostSeqs"`
			Damaged    []string `json:"damaged"`
		} `json:"data"`
	}
	if err := json.Unmarshal(after[n-1], &last); err != nil || last.Type != "log.repaired" {
		t.Fatalf("last event is not log.repaired: %s", after[n-1])
	}
	if last.Data.Quarantine != filepath.Base(rep.Quarantine) || len(last.Data.LostSeqs) != 1 || len(last.Data.Damaged) != 2 {
		t.Errorf("log.repaired does not name the quarantine file and what was lost: %s", after[n-1])
	}
	if !strings.Contains(string(after[5]), "log.repaired") {
		t.Errorf("lost seq 6 is not filled by log.repaired: %s", after[5])
	}

	// Projections rebuilt: tasks.json reflects the new last seq, the
	// steering file no longer holds the lost steer, outbox holds both.
	var snap struct {
		Seq int64 `json:"seq"`
	}
	data, _ := os.ReadFile(filepath.Join(rd, "tasks.json"))
	if json.Unmarshal(data, &snap) != nil || snap.Seq != n {
		t.Errorf("tasks.json not rebuilt to seq %d: %s", n, data)
	}
	if got := len(logLines(t, filepath.Join(rd, "mailbox", "outbox.jsonl"))); got != 2 {
		t.Errorf("outbox.jsonl has %d lines after repair, want 2", got)
	}
	if data, _ := os.ReadFile(filepath.Join(rd, "mailbox", "steering.jsonl")); len(data) != 0 {
		t.Errorf("steering.jsonl should be empty (the steer was lost): %s", data)
	}

	for _, args := range [][]string{
		{"events", "--run", "r1"}, {"pending", "--run", "r1"}, {"task", "list", "--run", "r1"},
		{"outbox", "--run", "r1"}, {"inbox", "--run", "r1", "--task", "t2"},
	} {
		if res := runCrew(t, dir, args...); res.Code != 0 {
			t.Errorf("after repair, %s: exit %d\n%s", strings.Join(args, " "), res.Code, res.Stderr)
		}
	}
	if out := crew(t, dir, "pending", "--run", "r1"); !strings.Contains(out, question) {
		t.Errorf("after repair, pending lost the open question:\n%s", out)
	}
	n = assertDenseLog(t, logPath) // the readers above recorded deliveries
	crew(t, dir, "respond", "t1", "Postgres", "--run", "r1")
	if got := assertDenseLog(t, logPath); got != n+1 {
		t.Errorf("after repair and respond the log has %d events, want %d", got, n+1)
	}
	// Repairing a healthy log changes nothing in it.
	before, _ := os.ReadFile(logPath)
	crew(t, dir, "repair", "r1")
	if now, _ := os.ReadFile(logPath); !bytes.Equal(before, now) {
		t.Errorf("repair of a healthy log rewrote it")
	}
}

// TestDamageUnderTheSnapshotIsFoundByFullReaders: a line damaged in place
// inside the part of the log that tasks.json already summarises is found
// by the readers that read the whole log (events, repair), and repair
// quarantines it. Readers that start from the snapshot read only what
// follows it (docs/reading.md, Cursors: a read costs what it returns), so they are not
// expected to notice.
func TestDamageUnderTheSnapshotIsFoundByFullReaders(t *testing.T) {
	dir, _ := damageRun(t)
	rd := runDir(dir, "r1")
	logPath := filepath.Join(rd, "events.jsonl")
	lines := logLines(t, logPath)
	// Same length, so the snapshot's offset still matches the log.
	lines[2] = bytes.Repeat([]byte("#"), len(lines[2]))
	writeLines(t, logPath, lines)
	wantDamaged(t, "events", runCrew(t, dir, "events", "--run", "r1"), "events.jsonl:line 3")
	out := crew(t, dir, "repair", "r1", "--json")
	if !strings.Contains(out, `"lostSeqs":[3]`) {
		t.Errorf("repair did not find the damage under the snapshot: %s", out)
	}
	res := runCrew(t, dir, "events", "--run", "r1")
	if res.Code != 0 {
		t.Errorf("after repair, events: exit %d\n%s", res.Code, res.Stderr)
	}
	assertDenseLog(t, logPath)
}

// TestInboxPrintsWhatItCanWhenTheLastLineIsDamaged: a damaged last line
// makes writers refuse (run crew repair), but inbox still prints the
// messages it can read and exits 7.
func TestInboxPrintsWhatItCanWhenTheLastLineIsDamaged(t *testing.T) {
	dir, _ := damageRun(t)
	appendLines(t, filepath.Join(runDir(dir, "r1"), "events.jsonl"), []byte(`{"seq":8,"type":`))
	res := runCrew(t, dir, "inbox", "--json", "--run", "r1", "--task", "t2")
	wantDamaged(t, "inbox", res, "events.jsonl", "crew repair")
	if recs := jsonRecords(t, res.Stdout); len(recs) != 1 || recs[0]["body"] != "focus on the parser" {
		t.Errorf("inbox did not print the readable steer:\n%s", res.Stdout)
	}
	res = runCrew(t, dir, "steer", "t2", "more", "--run", "r1")
	wantDamaged(t, "steer onto a damaged last line", res, "crew repair")
}

// TestMissingOrCorruptProjectionsAreRebuilt: tasks.json and the mailbox
// files are projections; deleting or corrupting them changes no reader's
// answer, and they are rebuilt from the log without the user running
// repair: tasks.json and a deleted mailbox file by the next write, a
// mailbox file with a damaged line by the reader that meets the damage.
func TestMissingOrCorruptProjectionsAreRebuilt(t *testing.T) {
	dir, question := damageRun(t)
	rd := runDir(dir, "r1")
	logPath := filepath.Join(rd, "events.jsonl")
	mb := filepath.Join(rd, "mailbox")
	wantTasks := crew(t, dir, "task", "list", "--json", "--run", "r1")
	wantPending := crew(t, dir, "pending", "--json", "--run", "r1")
	check := func(when string) {
		t.Helper()
		if got := crew(t, dir, "task", "list", "--json", "--run", "r1"); got != wantTasks {
			t.Errorf("%s: task list changed:\n got %s\nwant %s", when, got, wantTasks)
		}
		if got := crew(t, dir, "pending", "--json", "--run", "r1"); got != wantPending {
			t.Errorf("%s: pending changed:\n got %s\nwant %s", when, got, wantPending)
		}
	}
	snapSeq := func() int64 {
		var snap struct {
			Seq int64 `json:"seq"`
		}
		data, _ := os.ReadFile(filepath.Join(rd, "tasks.json"))
		if json.Unmarshal(data, &snap) != nil {
			return -1
		}
		return snap.Seq
	}

	// tasks.json: missing, not JSON, or not matching the log.
	for _, c := range []struct {
		name    string
		content []byte
	}{{"missing", nil}, {"not JSON", []byte("{\"seq\":7,\"offs")}, {"wrong offset", []byte(`{"seq":7,"offset":12,"tasks":{}}` + "\n")}} {
		p := filepath.Join(rd, "tasks.json")
		if c.content == nil {
			os.Remove(p)
		} else if err := os.WriteFile(p, c.content, 0o600); err != nil {
			t.Fatal(err)
		}
		check("tasks.json " + c.name)
	}
	crew(t, dir, "nudge", "t2", "--run", "r1")
	if got, want := snapSeq(), assertDenseLog(t, logPath); got != want {
		t.Errorf("tasks.json not rewritten by the next write: seq %d, want %d", got, want)
	}

	// A deleted mailbox file: readers fall back to the log, and the next
	// message of its kind rebuilds the whole file, not just its own line.
	outbox, _ := os.ReadFile(filepath.Join(mb, "outbox.jsonl"))
	os.Remove(filepath.Join(mb, "outbox.jsonl"))
	if out := crew(t, dir, "pending", "--json", "--run", "r1"); !strings.Contains(out, question) {
		t.Errorf("pending lost the question when outbox.jsonl was deleted:\n%s", out)
	}
	crew(t, dir, "report", "more news", "--run", "r1", "--task", "t2")
	got, _ := os.ReadFile(filepath.Join(mb, "outbox.jsonl"))
	if !bytes.HasPrefix(got, outbox) || len(logLines(t, filepath.Join(mb, "outbox.jsonl"))) != 3 {
		t.Errorf("outbox.jsonl not rebuilt from the log after it was deleted:\n%s", got)
	}

	// A damaged line in a mailbox file: the reader still shows the
	// message (from the log) and the file is rebuilt.
	steering, _ := os.ReadFile(filepath.Join(mb, "steering.jsonl"))
	if err := os.WriteFile(filepath.Join(mb, "steering.jsonl"), append(append([]byte(nil), steering...), "garbage\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := crew(t, dir, "inbox", "--json", "--run", "r1", "--task", "t2"); !strings.Contains(out, "focus on the parser") {
		t.Errorf("inbox lost the steer when steering.jsonl was damaged:\n%s", out)
	}
	if now, _ := os.ReadFile(filepath.Join(mb, "steering.jsonl")); !bytes.Equal(now, steering) {
		t.Errorf("steering.jsonl not rebuilt after its damage was met:\n%s", now)
	}
}

// fileImage is what a directory tree holds: for every entry below the
// root, its mode and (for regular files) its bytes, or its link target.
type fileImage map[string]string

// takeImage records the tree under root.
func takeImage(t *testing.T, root string) fileImage {
	t.Helper()
	img := fileImage{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			img[rel] = "link -> " + target
		case fi.IsDir():
			img[rel] = fi.Mode().String() + " dir"
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			img[rel] = fi.Mode().String() + " " + string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read tree %s: %v", root, err)
	}
	return img
}

// assertSameImage fails with the differences if the tree under root is not
// what before recorded.
func assertSameImage(t *testing.T, what, root string, before fileImage) {
	t.Helper()
	after := takeImage(t, root)
	var diffs []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			diffs = append(diffs, "removed "+p)
		case a != b:
			diffs = append(diffs, "changed "+p+": "+shortDiff(b, a))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			diffs = append(diffs, "added "+p)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("%s: files under %s changed:\n  %s", what, root, strings.Join(diffs, "\n  "))
	}
}

func shortDiff(before, after string) string {
	i := 0
	for i < len(before) && i < len(after) && before[i] == after[i] {
		i++
	}
	cut := func(s string) string {
		if len(s) > i+60 {
			s = s[:i+60] + "…"
		}
		if i > 20 {
			s = "…" + s[i-20:]
		}
		return s
	}
	return "was " + strings.TrimSpace(cut(before)) + " now " + strings.TrimSpace(cut(after))
}
