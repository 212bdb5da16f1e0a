package guarantee

// Guarantee 2 (docs/guarantees.md): a crash mid-write never leaves a record that
// readers misparse. A last line without '\n' in events.jsonl or in a
// mailbox file was never acknowledged (or is still being written): readers
// neither print it nor call it damage, and the next writer, holding the run
// lock, cuts it off so its own record is never glued to it.
//
// SIGKILL cannot cut a write(2) in half, so the torn lines are put in by
// hand, as a power loss or a short write would leave them.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tornFragments are unterminated last lines: a line cut short, and a whole
// event whose '\n' never reached the file (it looks complete, but was
// never acknowledged).
var tornFragments = map[string]string{
	"cut short": `{"seq":3,"at":"2026-11-29T21:04:05.123Z","type":"message.sent","run":"r1","task":"t1","message":{"id":"01`,
	"no newline": `{"seq":3,"at":"2026-11-29T21:04:05.123Z","type":"message.sent","run":"r1","task":"t1","actor":"leader",` +
		`"message":{"id":"0193a1c2-0000-7000-8000-000000000000","seq":3,"run":"r1","task":"t1","kind":"steer","direction":"inbox",` +
		`"from":"leader","to":"t1","body":"NEVER ACKNOWLEDGED","priority":"normal","status":"pending","sentAt":"2026-11-29T21:04:05.123Z"}}`,
}

// TestTornLogTail: with a torn last line in events.jsonl, every reader
// (events, task list, pending, inbox) exits 0, prints nothing of it and
// reports no damage; the next writer cuts it off, so the file is exactly
// the old complete lines plus the new record.
func TestTornLogTail(t *testing.T) {
	for name, frag := range tornFragments {
		t.Run(name, func(t *testing.T) {
			dir := newRun(t, "r1", "t1")
			logPath := filepath.Join(runDir(dir, "r1"), "events.jsonl")
			before := readFile(t, logPath)
			appendBytes(t, logPath, frag)

			for _, args := range [][]string{{"events"}, {"task", "list"}, {"pending"}, {"pending", "--task", "t1"}, {"inbox", "--task", "t1"}, {"run", "show"}} {
				res := runCrew(t, dir, append(args, "--json")...)
				if res.Code != 0 || strings.Contains(res.Stderr, "damage") || strings.Contains(res.Stderr, "repair") {
					t.Fatalf("crew %s with a torn log tail: exit %d: %s", strings.Join(args, " "), res.Code, res.Stderr)
				}
				if strings.Contains(res.Stdout, "NEVER ACKNOWLEDGED") || strings.Contains(res.Stdout, `"seq":3`) {
					t.Fatalf("crew %s printed the torn line:\n%s", strings.Join(args, " "), res.Stdout)
				}
			}
			if evs := eventsCLI(t, dir, "r1"); len(evs) != 2 {
				t.Fatalf("crew events printed %d events, want 2", len(evs))
			}

			crew(t, dir, "steer", "t1", "next")
			after := readFile(t, logPath)
			if !bytes.HasPrefix(after, before) {
				t.Fatalf("the writer changed the complete lines before the torn one")
			}
			lines, torn := splitLines(after[len(before):])
			if torn != 0 || len(lines) != 1 {
				t.Fatalf("after the next write, the log ends in %q; want the old lines and one new line", after[len(before):])
			}
			e, err := decodeEvent(lines[0])
			if err != nil || e.Seq != 3 || e.msg == nil || e.msg.Body != "next" {
				t.Fatalf("the new record is %q (%v); want seq 3, the steer \"next\"", lines[0], err)
			}
			if evs := eventsCLI(t, dir, "r1"); len(evs) != 3 {
				t.Fatalf("crew events printed %d events after the write, want 3", len(evs))
			}
		})
	}
}

// mailboxCase is a mailbox file and the commands that write to it and read
// it.
type mailboxCase struct {
	file        string
	write       func(body string) []string // a crew command that appends a message to file
	read        []string                   // a crew command that shows file's messages (and marks them delivered: a write)
	peek        []string                   // a crew command that shows them and writes nothing
	fragKind    string
	fragDirFrom string
}

var mailboxCases = []mailboxCase{
	{"steering.jsonl", func(b string) []string { return []string{"steer", "t1", b} },
		[]string{"inbox", "--task", "t1", "--json"}, []string{"pending", "--task", "t1", "--json"},
		"steer", `"direction":"inbox","from":"leader","to":"t1"`},
	{"inbox.jsonl", func(b string) []string { return []string{"nudge", "t1", b} },
		[]string{"inbox", "--task", "t1", "--json"}, []string{"pending", "--task", "t1", "--json"},
		"nudge", `"direction":"inbox","from":"leader","to":"t1"`},
	{"outbox.jsonl", func(b string) []string { return []string{"report", b, "--task", "t1", "--priority", "urgent"} },
		[]string{"outbox", "--json"}, []string{"pending", "--json"},
		"report", `"direction":"outbox","from":"t1","to":"leader"`},
}

// TestTornMailboxTail: for each mailbox file, a torn last line (cut short,
// or a whole message without its '\n') is not shown by readers, who exit 0
// without calling it damage, even though they read message bodies from
// that file; the next message written to the file cuts it off, so the file
// is its old lines plus the new one.
func TestTornMailboxTail(t *testing.T) {
	for _, c := range mailboxCases {
		for fname, frag := range map[string]string{
			"cut short":  `{"id":"0193a1c2-0000-7000-8000-0000000000`,
			"no newline": `{"id":"0193a1c2-0000-7000-8000-000000000000","seq":99,"run":"r1","task":"t1","kind":"` + c.fragKind + `",` + c.fragDirFrom + `,"body":"NEVER ACKNOWLEDGED","priority":"normal","status":"pending","sentAt":"2026-11-29T21:04:05.123Z"}`,
		} {
			t.Run(strings.TrimSuffix(c.file, ".jsonl")+"/"+fname, func(t *testing.T) {
				dir := newRun(t, "r1", "t1")
				crew(t, dir, c.write("first")...)
				path := filepath.Join(runDir(dir, "r1"), "mailbox", c.file)
				before := readFile(t, path)
				appendBytes(t, path, frag)

				res := runCrew(t, dir, c.read...)
				if res.Code != 0 || res.Stderr != "" {
					t.Fatalf("crew %s with a torn mailbox tail: exit %d: %s", strings.Join(c.read, " "), res.Code, res.Stderr)
				}
				if strings.Contains(res.Stdout, "NEVER ACKNOWLEDGED") || !strings.Contains(res.Stdout, `"body":"first"`) {
					t.Fatalf("crew %s printed:\n%s\nwant the message \"first\" only", strings.Join(c.read, " "), res.Stdout)
				}

				crew(t, dir, c.write("second")...)
				after := readFile(t, path)
				if !bytes.HasPrefix(after, before) {
					t.Fatalf("the writer changed the complete lines of %s", c.file)
				}
				lines, torn := splitLines(after[len(before):])
				if torn != 0 || len(lines) != 1 {
					t.Fatalf("after the next write, %s ends in %q; want one new line", c.file, after[len(before):])
				}
				var m struct{ Body string }
				if err := json.Unmarshal(lines[0], &m); err != nil || m.Body != "second" {
					t.Fatalf("the new line of %s is %q", c.file, lines[0])
				}
				checkProjections(t, dir, "r1", eventsCLI(t, dir, "r1"))
			})
		}
	}
}

// TestTornProjectionCaughtUp: a writer that crashed after committing a
// message, in the middle of appending its mailbox line (the line is torn)
// and before updating tasks.json, is caught up by the next writer: the torn
// line is cut and the message appended whole, exactly once, in every
// mailbox file, and all projections agree with the log.
func TestTornProjectionCaughtUp(t *testing.T) {
	for _, c := range mailboxCases {
		t.Run(strings.TrimSuffix(c.file, ".jsonl"), func(t *testing.T) {
			dir := newRun(t, "r1", "t1")
			crew(t, dir, c.write("first")...)
			rd := runDir(dir, "r1")
			snap := readFile(t, filepath.Join(rd, "tasks.json"))
			path := filepath.Join(rd, "mailbox", c.file)
			before := readFile(t, path)
			crew(t, dir, c.write("lost in the crash")...)
			// Put the files back as a crash in the middle of the
			// projection would have left them: the new line torn, the
			// snapshot not yet written.
			after := readFile(t, path)
			torn := after[:len(before)+(len(after)-len(before))/2]
			writeFile(t, path, torn)
			writeFile(t, filepath.Join(rd, "tasks.json"), snap)

			res := runCrew(t, dir, c.peek...)
			if res.Code != 0 || !strings.Contains(res.Stdout, "lost in the crash") {
				t.Fatalf("crew %s before catch-up: exit %d, stdout %s, stderr %s; want the committed message (read from the log)", strings.Join(c.peek, " "), res.Code, res.Stdout, res.Stderr)
			}
			if now := readFile(t, path); !bytes.Equal(now, torn) {
				t.Fatalf("crew %s changed %s", strings.Join(c.peek, " "), c.file)
			}
			crew(t, dir, "steer", "t1", "next") // any write catches up
			checkProjections(t, dir, "r1", eventsCLI(t, dir, "r1"))
			checkRebuild(t, dir, "r1")
		})
	}
}

// TestTornMailTreeTemp: a delivery that crashed before its link leaves a
// hidden, partly written temp file in the recipient's mail directory;
// crew mail check neither lists it nor reports damage.
func TestTornMailTreeTemp(t *testing.T) {
	dir := newRoot(t)
	crew(t, dir, "mail", "send", "--to", "bob", "--from", "alice", "--create-recipient", "whole")
	writeFile(t, filepath.Join(mailDir(dir, "bob"), ".tmp-0193a1c2-0000-7000-8000-000000000000"), []byte(`{"body":"TORN","from":"ali`))
	res := runCrew(t, dir, "mail", "check", "bob", "--json")
	if res.Code != 0 || res.Stderr != "" || strings.Contains(res.Stdout, "TORN") || !strings.Contains(res.Stdout, `"body":"whole"`) {
		t.Fatalf("crew mail check with a torn temp file: exit %d\nstdout: %s\nstderr: %s", res.Code, res.Stdout, res.Stderr)
	}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// writeFile replaces the content of the file at path, keeping its inode
// and mode (as a crashed writer would have left the file).
func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
}
