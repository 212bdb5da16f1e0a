package guarantee

// Checks shared by the crash and concurrency tests. They read the files
// themselves (and crew's --json output) and decode them with encoding/json
// alone, so a bug in crew's own decoders cannot hide a bug in its writers.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// logEvent is an event line as the tests see it.
type logEvent struct {
	Seq        int64           `json:"seq"`
	Type       string          `json:"type"`
	Task       string          `json:"task"`
	To         string          `json:"to"`
	Message    json.RawMessage `json:"message"`
	MessageIDs []string        `json:"messageIds"`

	msg *logMessage // Message decoded, nil when the event carries none
}

// logMessage is the part of a message the tests look at.
type logMessage struct {
	ID        string `json:"id"`
	Seq       int64  `json:"seq"`
	Task      string `json:"task"`
	Kind      string `json:"kind"`
	Direction string `json:"direction"`
	To        string `json:"to"`
	Body      string `json:"body"`
	ReplyTo   string `json:"replyTo"`
}

// mailboxFile returns the mailbox file a message belongs in (docs/files.md, Mailbox files):
// steers in steering.jsonl, others by direction.
func (m *logMessage) mailboxFile() string {
	if m.Kind == "steer" {
		return "steering.jsonl"
	}
	return m.Direction + ".jsonl"
}

// decodeEvent decodes one event line; every event must have a seq and a
// type.
func decodeEvent(line []byte) (logEvent, error) {
	var e logEvent
	if err := json.Unmarshal(line, &e); err != nil {
		return e, err
	}
	if e.Seq <= 0 || e.Type == "" {
		return e, fmt.Errorf("no seq or type")
	}
	if len(e.Message) > 0 && string(e.Message) != "null" {
		e.msg = new(logMessage)
		if err := json.Unmarshal(e.Message, e.msg); err != nil {
			return e, err
		}
		if e.msg.Seq != e.Seq {
			return e, fmt.Errorf("message seq %d in event seq %d", e.msg.Seq, e.Seq)
		}
	}
	return e, nil
}

// splitLines returns the complete lines of data (without '\n') and the
// length of an unterminated last line.
func splitLines(data []byte) (lines [][]byte, torn int) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return lines, len(data)
		}
		lines = append(lines, data[:i])
		data = data[i+1:]
	}
	return lines, 0
}

// readLog reads a run's events.jsonl directly. Every complete line must be
// an event and seq must be dense from 1; it returns the events and the
// length of a torn last line (0 if none).
func readLog(t testing.TB, dir, runID string) ([]logEvent, int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(runDir(dir, runID), "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines, torn := splitLines(data)
	evs := make([]logEvent, 0, len(lines))
	for i, l := range lines {
		e, err := decodeEvent(l)
		if err != nil {
			t.Fatalf("events.jsonl line %d is not an event (%v): %q", i+1, err, l)
		}
		evs = append(evs, e)
	}
	checkDense(t, "events.jsonl", evs)
	return evs, torn
}

// eventsCLI runs `crew events --json` for the run: it must exit 0 and
// print one event per line, seq dense from 1. It returns the events.
func eventsCLI(t testing.TB, dir, runID string) []logEvent {
	t.Helper()
	res := runCrew(t, dir, "events", "--json", "--run", runID)
	if res.Code != 0 {
		t.Fatalf("crew events --json: exit %d: %s", res.Code, res.Stderr)
	}
	evs, err := parseEvents(res.Stdout)
	if err != nil {
		t.Fatalf("crew events --json: %v", err)
	}
	checkDense(t, "crew events --json", evs)
	return evs
}

// parseEvents decodes crew events --json output. Every line must be an
// event, and the output must end in a newline.
func parseEvents(out string) ([]logEvent, error) {
	if out != "" && !strings.HasSuffix(out, "\n") {
		return nil, fmt.Errorf("output does not end in a newline: %q", out[max(0, len(out)-200):])
	}
	lines, _ := splitLines([]byte(out))
	evs := make([]logEvent, 0, len(lines))
	for i, l := range lines {
		e, err := decodeEvent(l)
		if err != nil {
			return nil, fmt.Errorf("line %d is not a whole event (%v): %q", i+1, err, l)
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// checkDense fails unless evs[i].Seq == i+1 for every i.
func checkDense(t testing.TB, what string, evs []logEvent) {
	t.Helper()
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("%s: seq not dense: line %d has seq %d", what, i+1, e.Seq)
		}
	}
}

// messagesByBody indexes the messages of evs by body; a body sent twice
// fails the test (every body the tests send is unique).
func messagesByBody(t testing.TB, evs []logEvent) map[string]*logEvent {
	t.Helper()
	out := map[string]*logEvent{}
	for i := range evs {
		if m := evs[i].msg; m != nil {
			if prev := out[m.Body]; prev != nil {
				t.Fatalf("message body %q is in the log twice: seq %d and %d", m.Body, prev.Seq, evs[i].Seq)
			}
			out[m.Body] = &evs[i]
		}
	}
	return out
}

// checkRecorded fails unless every "OP BODY" line of records (written by
// the writer helper after crew exited 0) is in the log as the message that
// operation sends.
func checkRecorded(t testing.TB, records []string, byBody map[string]*logEvent) {
	t.Helper()
	for _, rec := range records {
		op, body, _ := strings.Cut(rec, " ")
		kind, task, _ := strings.Cut(op, ":")
		e := byBody[body]
		if e == nil {
			t.Fatalf("%s %q reported success but is not in the log", op, body)
		}
		wantKind := map[string]string{"steer": "steer", "nudge": "nudge", "report": "report", "ask": "question", "respond": "response"}[kind]
		if e.msg.Kind != wantKind || e.msg.Task != task {
			t.Fatalf("%s %q is in the log as a %s for task %s (seq %d)", op, body, e.msg.Kind, e.msg.Task, e.Seq)
		}
	}
}

// checkProjections checks that the run's projections agree with its log
// (evs, as read after the last operation):
//
//   - each mailbox file holds, line for line, exactly the messages of the
//     log that belong to it, in seq order, each equal to the copy in its
//     event, and no torn last line;
//   - each message is in its recipient's mail tree exactly once (leader
//     for outbox, the task's agent for inbox; agents are the task ids),
//     with its body, and its read flag set iff the log says the recipient
//     has seen it (message.delivered/acknowledged, or a response to a
//     question); no mail file belongs to no message;
//   - tasks.json reflects the log up to its seq (its offset is where
//     that event's line ends, every task's status the one the log gave it
//     by then, no other task), and is behind the log by fewer events than
//     make it due (docs/files.md, Snapshots: 1 + tasks/32, at most 128);
//     when it is behind, the projection mark (projected.json) is at the
//     log's end, or the next writer would project those events again.
//
// It returns the number of hidden temporary files found in the run and
// mail directories (left by processes killed mid-write).
func checkProjections(t testing.TB, dir, runID string, evs []logEvent) (temps int) {
	t.Helper()
	rd := runDir(dir, runID)

	// Mailbox files.
	want := map[string][]json.RawMessage{}
	for _, e := range evs {
		if e.msg != nil {
			want[e.msg.mailboxFile()] = append(want[e.msg.mailboxFile()], e.Message)
		}
	}
	for _, file := range []string{"inbox.jsonl", "outbox.jsonl", "steering.jsonl"} {
		data, err := os.ReadFile(filepath.Join(rd, "mailbox", file))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		lines, torn := splitLines(data)
		if torn > 0 {
			t.Errorf("mailbox/%s ends in a torn line of %d bytes after the next operation", file, torn)
		}
		if len(lines) != len(want[file]) {
			t.Fatalf("mailbox/%s has %d lines, the log has %d messages for it", file, len(lines), len(want[file]))
		}
		for i, l := range lines {
			var got, exp any
			if err := json.Unmarshal(l, &got); err != nil {
				t.Fatalf("mailbox/%s line %d: %v: %q", file, i+1, err, l)
			}
			json.Unmarshal(want[file][i], &exp)
			if !reflect.DeepEqual(got, exp) {
				t.Fatalf("mailbox/%s line %d differs from the log:\n got %s\nwant %s", file, i+1, l, want[file][i])
			}
		}
	}

	// Mail tree.
	seen := map[string]bool{}
	for _, e := range evs {
		seen = markSeen(seen, e)
	}
	type copyWant struct {
		agent, body string
		read        bool
	}
	copies := map[string]copyWant{}
	for _, e := range evs {
		if m := e.msg; m != nil {
			agent := m.To
			if m.Direction == "outbox" {
				agent = "leader"
			}
			copies[m.ID] = copyWant{agent, m.Body, seen[agent+"/"+m.ID]}
		}
	}
	found := map[string]int{}
	mailRoot := filepath.Join(dir, ".crew", "state", "mail")
	agents, err := os.ReadDir(mailRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		files, err := os.ReadDir(filepath.Join(mailRoot, a.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			name := f.Name()
			if strings.HasPrefix(name, ".") {
				temps++
				continue
			}
			if f.IsDir() {
				continue
			}
			data, err := os.ReadFile(filepath.Join(mailRoot, a.Name(), name))
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				ID   string `json:"id"`
				Body string `json:"body"`
				Read bool   `json:"read"`
			}
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatalf("mail %s/%s: %v: %q", a.Name(), name, err, data)
			}
			w, ok := copies[m.ID]
			switch {
			case !ok:
				t.Fatalf("mail %s/%s belongs to no message of the log", a.Name(), name)
			case w.agent != a.Name() || w.body != m.Body:
				t.Fatalf("mail %s/%s: message %s (%q) belongs to %s", a.Name(), name, m.ID, m.Body, w.agent)
			case w.read != m.Read:
				t.Fatalf("mail %s/%s: read is %v, the log says %v", a.Name(), name, m.Read, w.read)
			}
			found[m.ID]++
		}
	}
	for id, w := range copies {
		if found[id] != 1 {
			t.Fatalf("message %s (%q) is in %s's mail tree %d times, want once", id, w.body, w.agent, found[id])
		}
	}

	// tasks.json, and the projection mark when tasks.json is behind.
	var snap struct {
		Seq    int64 `json:"seq"`
		Offset int64 `json:"offset"`
		Tasks  map[string]struct {
			Status string `json:"status"`
		} `json:"tasks"`
	}
	data, err := os.ReadFile(filepath.Join(rd, "tasks.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &snap); err != nil {
		t.Fatalf("tasks.json: %v", err)
	}
	ends := lineEnds(t, dir, runID)
	last := evs[len(evs)-1].Seq
	if ends[snap.Seq] == 0 || snap.Offset != ends[snap.Seq] {
		t.Fatalf("tasks.json reflects seq %d, offset %d; the log's line of seq %d ends at offset %d", snap.Seq, snap.Offset, snap.Seq, ends[snap.Seq])
	}
	status := map[string]string{}
	for _, e := range evs[:snap.Seq] {
		if e.Task != "" && e.To != "" && strings.HasPrefix(e.Type, "task.") {
			status[e.Task] = e.To
		}
	}
	for id, s := range status {
		if snap.Tasks[id].Status != s {
			t.Fatalf("tasks.json: task %s is %q, the log says %q at seq %d", id, snap.Tasks[id].Status, s, snap.Seq)
		}
	}
	if len(snap.Tasks) != len(status) {
		t.Fatalf("tasks.json has %d tasks, the log %d at seq %d", len(snap.Tasks), len(status), snap.Seq)
	}
	if behind, n := last-snap.Seq, tasksIn(evs); !withinDue(behind, n) {
		t.Fatalf("tasks.json is %d events behind the log, for %d tasks: it is due sooner", behind, n)
	}
	if snap.Seq < last {
		if m := readMark(t, rd); m.Seq != last || m.Offset != ends[last] {
			t.Fatalf("tasks.json is at seq %d of %d, and the projection mark at seq %d, offset %d, not the log's end (offset %d)", snap.Seq, last, m.Seq, m.Offset, ends[last])
		}
	}

	for _, d := range []string{rd, filepath.Join(rd, "mailbox")} {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") && !kept[e.Name()] {
				temps++
			}
		}
	}
	return temps
}

// withinDue reports whether tasks.json, behind the log by behind events
// in a run of n tasks, is as far as crew keeps it: it is written once it
// is behind by 1 + n/32 events, at most 128 (docs/files.md, Snapshots).
func withinDue(behind int64, n int) bool {
	return behind < min(128, 1+int64(n)/32)
}

// tasksIn returns how many tasks the log evs has.
func tasksIn(evs []logEvent) int {
	ids := map[string]bool{}
	for _, e := range evs {
		if e.Task != "" && e.To != "" && strings.HasPrefix(e.Type, "task.") {
			ids[e.Task] = true
		}
	}
	return len(ids)
}

// lineEnds returns, by seq, the byte offset in the run's events.jsonl
// where each complete event's line ends.
func lineEnds(t testing.TB, dir, runID string) map[int64]int64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(runDir(dir, runID), "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines, _ := splitLines(data)
	ends := make(map[int64]int64, len(lines))
	var off int64
	for _, l := range lines {
		off += int64(len(l)) + 1
		var e struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal(l, &e) == nil {
			ends[e.Seq] = off
		}
	}
	return ends
}

// projMark is a run's projection mark, projected.json (docs/files.md,
// Snapshots): how far its projections are written.
type projMark struct {
	Seq    int64 `json:"seq"`
	Offset int64 `json:"offset"`
}

// readMark reads the projection mark of the run in rd; a missing or
// unreadable one is the zero mark.
func readMark(t testing.TB, rd string) projMark {
	t.Helper()
	var m projMark
	if data, err := os.ReadFile(filepath.Join(rd, "projected.json")); err == nil {
		json.Unmarshal(data, &m)
	}
	return m
}

// markSeen adds to seen ("agent/messageID") what event e says a recipient
// has seen: messages delivered or acknowledged (by the task, whose agent
// has its name here, or by the leader), and the question a response
// answers (the leader has seen it).
func markSeen(seen map[string]bool, e logEvent) map[string]bool {
	switch e.Type {
	case "message.delivered", "message.acknowledged":
		agent := e.Task
		if agent == "" {
			agent = "leader"
		}
		for _, id := range e.MessageIDs {
			seen[agent+"/"+id] = true
		}
	case "task.responded":
		if e.msg != nil && e.msg.ReplyTo != "" {
			seen["leader/"+e.msg.ReplyTo] = true
		}
	}
	return seen
}

// checkRebuild copies the state root of dir, deletes every projection in
// the copy (tasks.json, mailbox files, the mail tree), rebuilds them with
// `crew repair`, and fails unless the rebuilt projections equal the
// originals byte for byte (hidden temporary files aside): the projections
// are exactly what the log alone gives. A tasks.json behind the log (the
// projection mark says the rest: docs/files.md, Snapshots) is compared
// with one rebuilt from the log as far as its seq.
func checkRebuild(t testing.TB, dir, runID string) {
	t.Helper()
	compareRebuild(t, dir, runID, "", projectionFiles(t, dir, runID), projectionFiles(t, rebuiltCopy(t, dir, runID, 0), runID))
}

// compareRebuild fails unless the projections orig, of the run in dir,
// equal rebuilt, byte for byte and name for name (projectionFiles'
// names); a tasks.json behind the log is compared with one rebuilt from
// the log as far as its seq. Each failure's message starts with prefix.
func compareRebuild(t testing.TB, dir, runID, prefix string, orig, rebuilt map[string][]byte) {
	t.Helper()
	if seq := tasksJSONSeq(t, dir, runID); seq < lastSeq(t, dir, runID) {
		name := "runs/" + runID + "/tasks.json"
		rebuilt[name] = projectionFiles(t, rebuiltCopy(t, dir, runID, seq), runID)[name]
	}
	for name, data := range orig {
		if r, ok := rebuilt[name]; !ok {
			t.Errorf("%s%s is not in the rebuilt projections", prefix, name)
		} else if !bytes.Equal(r, data) {
			t.Errorf("%s%s differs from its rebuild:\n got %q\nwant %q", prefix, name, data, r)
		}
	}
	for name := range rebuilt {
		if _, ok := orig[name]; !ok {
			t.Errorf("%s%s is missing (the rebuild has it)", prefix, name)
		}
	}
}

// rebuiltCopy copies the state root of dir, cuts the run's log after seq
// (unless seq is 0), deletes every projection in the copy and rebuilds
// them with `crew repair`. It returns the copy's directory.
func rebuiltCopy(t testing.TB, dir, runID string, seq int64) string {
	t.Helper()
	cp := t.TempDir()
	if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	rd := runDir(cp, runID)
	if seq != 0 {
		if err := os.Truncate(filepath.Join(rd, "events.jsonl"), lineEnds(t, dir, runID)[seq]); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(rd, "tasks.json"), filepath.Join(rd, "mailbox"), filepath.Join(cp, ".crew", "state", "mail")} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(cp, ".crew", "state", "mail"), 0o700); err != nil {
		t.Fatal(err)
	}
	crew(t, cp, "repair", runID)
	return cp
}

// lastSeq returns the seq of the last complete event of the run's log.
func lastSeq(t testing.TB, dir, runID string) int64 {
	t.Helper()
	var last int64
	for seq := range lineEnds(t, dir, runID) {
		last = max(last, seq)
	}
	return last
}

// projectionFiles returns the projections of a run, by path relative to
// the state root: tasks.json, the mailbox files (missing ones read as
// empty) and every non-hidden file of the mail tree.
func projectionFiles(t testing.TB, dir, runID string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	rd := runDir(dir, runID)
	for _, name := range []string{"tasks.json", "mailbox/inbox.jsonl", "mailbox/outbox.jsonl", "mailbox/steering.jsonl"} {
		data, err := os.ReadFile(filepath.Join(rd, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		out["runs/"+runID+"/"+name] = data
	}
	mail := filepath.Join(dir, ".crew", "state", "mail")
	err := filepath.WalkDir(mail, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(mail, p)
		out["mail/"+filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kept are the hidden files crew keeps on purpose: the spare tasks.json
// is rewritten into (run.rewriteKeepingInodes), and the locks that
// creators of runs, of mailboxes and of runs and tasks take in turn, and
// the .gitignore crew init writes.
var kept = map[string]bool{".tasks.json.spare": true, ".runs.lock": true, ".mail.lock": true, ".agents.lock": true, ".gitignore": true}

// hiddenFiles lists the hidden files (temporary files) under dir's state
// root, relative to it, but for those kept on purpose.
func hiddenFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(dir, ".crew")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root && strings.HasPrefix(d.Name(), ".") && !kept[d.Name()] {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// readLoop runs crew events --json on run r1 over and over until stop is
// closed and returns what was wrong with any of its outputs: an exit code
// other than 0, a line that is not a whole event, a seq gap, or a message
// body that does not match bodies (two records glued together).
func readLoop(t testing.TB, dir string, bodies *regexp.Regexp, stop <-chan struct{}) []string {
	var errs []string
	for {
		select {
		case <-stop:
			return errs
		default:
		}
		res := runCrew(t, dir, "events", "--json", "--run", "r1")
		if res.Code != 0 {
			errs = append(errs, fmt.Sprintf("crew events: exit %d: %s", res.Code, res.Stderr))
			continue
		}
		evs, err := parseEvents(res.Stdout)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				errs = append(errs, fmt.Sprintf("crew events: line %d has seq %d", i+1, e.Seq))
				break
			}
			if e.msg != nil && !bodies.MatchString(e.msg.Body) {
				errs = append(errs, fmt.Sprintf("crew events: seq %d has a body no writer sent: %q", e.Seq, e.msg.Body))
			}
		}
	}
}

// badJSONObjects returns the first line of out that is not a JSON object,
// or "".
func badJSONObjects(out string) string {
	lines, torn := splitLines([]byte(out))
	if torn > 0 {
		return out[len(out)-torn:]
	}
	for _, l := range lines {
		var v map[string]any
		if json.Unmarshal(l, &v) != nil {
			return string(l)
		}
	}
	return ""
}

// mailCheckLoop runs crew mail check AGENT --json over and over until stop
// is closed and returns what was wrong with any of its outputs: an exit
// code other than 0 (a mail file it could not read), or a line that is not
// a whole message whose body matches bodies.
func mailCheckLoop(t testing.TB, dir, agent string, bodies *regexp.Regexp, stop <-chan struct{}) []string {
	var errs []string
	for {
		select {
		case <-stop:
			return errs
		default:
		}
		res := runCrew(t, dir, "mail", "check", agent, "--json")
		if res.Code != 0 {
			errs = append(errs, fmt.Sprintf("crew mail check: exit %d: %s", res.Code, res.Stderr))
			continue
		}
		lines, torn := splitLines([]byte(res.Stdout))
		if torn > 0 {
			errs = append(errs, fmt.Sprintf("crew mail check: output ends in %q", res.Stdout[len(res.Stdout)-torn:]))
		}
		for _, l := range lines {
			var m struct{ Body string }
			if err := json.Unmarshal(l, &m); err != nil || !bodies.MatchString(m.Body) {
				errs = append(errs, fmt.Sprintf("crew mail check printed %q", l))
			}
		}
	}
}

// appendBytes appends data to the file at path (which must exist).
func appendBytes(t testing.TB, path, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
}
