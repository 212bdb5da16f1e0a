package guarantee

// Guarantees 6 and 7 of docs/guarantees.md (issue 3, part 7): hostile input. Ids
// never escape the state root; symbolic links inside the state root are
// not written through; files are created 0600 and directories 0700
// (0660/2770 with --shared-group); bodies up to the limit round-trip byte
// for byte (a 900 KiB body too: no 64 KiB line limit), bodies over it or
// not UTF-8 are refused with nothing written; control characters are
// escaped in human output and exact in --json; a run of 10,000 tasks
// works; a mail file that is not JSON is reported and the rest listed.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// Exit codes (docs/cli.md, Exit codes): invalid input, and a state root
// tampered with (a symbolic link where crew keeps its own file or
// directory).
const (
	exitInvalid  = 2
	exitConflict = 3
	exitTampered = 8
)

// TestIDsCannotEscapeTheStateRoot: every place an id is given (run, task,
// agent, mail recipient and sender, as argument, flag or environment)
// refuses ids that could name a path (.., a/b, /abs, a leading dot or
// dash, a newline, 65 characters) with exit 2 and a message naming the
// value and the rule, and nothing is created or changed anywhere.
func TestIDsCannotEscapeTheStateRoot(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "project")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	crew(t, dir, "init")
	crew(t, dir, "run", "create", "--id", "r1")
	crew(t, dir, "task", "add", "t1", "--run", "r1")
	crew(t, dir, "task", "start", "t1", "--run", "r1")
	crew(t, dir, "steer", "t1", "hi", "--run", "r1")
	bad := []string{"..", "../x", "../../../../tmp/x", "a/b", "/abs", ".hidden", "a\nb", "a b", "x..", strings.Repeat("a", 65), "a\\b", "é"}
	before := takeImage(t, parent)
	for _, id := range bad {
		for _, args := range [][]string{
			{"run", "create", "--id", id},
			{"run", "create", "--id", "r9", "--leader", id},
			{"task", "add", id, "--run", "r1"},
			{"task", "add", "t9", "--agent", id, "--run", "r1"},
			{"task", "list", "--run", id},
			{"steer", id, "hi", "--run", "r1"},
			{"respond", id, "hi", "--run", "r1"},
			{"inbox", "--run", "r1", "--task", id},
			{"ask", "q?", "--run", "r1", "--task", id},
			{"steer", "t1", "hi", "--run", "r1", "--as", id},
			{"mail", "send", "--to", id, "--create-recipient", "hi"},
			{"mail", "send", "--to", "t1", "--from", id, "hi"},
			{"mail", "check", id},
			{"mail", "read", id, "0193a1c2-7b1e-7c3d-9e2f-0a1b2c3d4e5f"},
			{"mail", "archive", id, "--include-unread", "--older-than", "0s"},
			{"repair", id},
		} {
			res := runCrew(t, dir, args...)
			name := fmt.Sprintf("%q", args)
			if res.Code != exitInvalid {
				t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", name, res.Code, exitInvalid, res.Stdout, res.Stderr)
				continue
			}
			if !strings.Contains(res.Stderr, fmt.Sprintf("%q", id)) && !strings.Contains(res.Stderr, id) {
				t.Errorf("%s: the message does not name the bad id:\n%s", name, res.Stderr)
			}
			if !strings.Contains(res.Stderr, "ids are 1-64 characters") {
				t.Errorf("%s: the message does not give the rule:\n%s", name, res.Stderr)
			}
		}
		// The environment is an input too.
		res := runCrewIn(t, dir, nil, []string{"CREW_RUN=r1", "CREW_TASK=" + id}, "report", "hi")
		if res.Code != exitInvalid {
			t.Errorf("CREW_TASK=%q: exit %d, want %d\n%s", id, res.Code, exitInvalid, res.Stderr)
		}
	}
	assertSameImage(t, "bad ids", parent, before)
}

// TestSymlinkedDirectoriesAreNotWrittenThrough: a mail directory, the
// run's mailbox directory or a run directory replaced by a symbolic link
// to a directory elsewhere is never written through: the target stays as
// it was, and commands that would have to write there are refused (or, for
// projections of an already committed operation, skip it).
func TestSymlinkedDirectoriesAreNotWrittenThrough(t *testing.T) {
	dir := newRun(t, "r1", "t1")
	crew(t, dir, "task", "start", "t1", "--run", "r1")
	elsewhere := t.TempDir()
	for _, d := range []string{"mail", "mailbox", "run"} {
		if err := os.Mkdir(filepath.Join(elsewhere, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	outside := takeImage(t, elsewhere)
	replace := func(path, target string) {
		t.Helper()
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
	}

	// The worker's mail directory.
	replace(mailDir(dir, "t1"), filepath.Join(elsewhere, "mail"))
	crew(t, dir, "steer", "t1", "through the link?", "--run", "r1") // committed; its mail-tree copy is not written
	for _, args := range [][]string{
		{"mail", "send", "--to", "t1", "--create-recipient", "through the link?"},
		{"mail", "send", "--to", "t1", "through the link?"},
		{"mail", "archive", "t1", "--include-unread", "--older-than", "0s"},
		{"mail", "check", "t1"},
	} {
		if res := runCrew(t, dir, args...); res.Code == 0 || !strings.Contains(res.Stderr, "symbolic link") {
			t.Errorf("%s with a symlinked mail directory: exit %d, want an error naming the link\n%s%s", strings.Join(args, " "), res.Code, res.Stdout, res.Stderr)
		}
	}
	if out := crew(t, dir, "inbox", "--json", "--run", "r1", "--task", "t1"); !strings.Contains(out, "through the link?") {
		t.Errorf("the steer was lost:\n%s", out)
	}

	// The run's mailbox directory.
	rd := runDir(dir, "r1")
	replace(filepath.Join(rd, "mailbox"), filepath.Join(elsewhere, "mailbox"))
	crew(t, dir, "follow-up", "t1", "through the link?", "--run", "r1")
	crew(t, dir, "report", "through the link?", "--run", "r1", "--task", "t1")
	if res := runCrew(t, dir, "repair", "r1"); res.Code == 0 {
		t.Errorf("repair rebuilt the mailbox through a symlink")
	}
	if out := crew(t, dir, "outbox", "--json", "--run", "r1"); !strings.Contains(out, "through the link?") {
		t.Errorf("the report was lost:\n%s", out)
	}

	// A run directory.
	if err := os.Symlink(filepath.Join(elsewhere, "run"), filepath.Join(filepath.Dir(rd), "r2")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"task", "add", "t2", "--run", "r2"},
		{"steer", "t1", "x", "--run", "r2"},
		{"repair", "r2"},
	} {
		if res := runCrew(t, dir, args...); res.Code != exitTampered || !strings.Contains(res.Stderr, "symbolic link") {
			t.Errorf("%s on a symlinked run directory: exit %d, want %d naming the link\n%s", strings.Join(args, " "), res.Code, exitTampered, res.Stderr)
		}
	}
	assertSameImage(t, "writes through symbolic links", elsewhere, outside)

	// The state root's own directories: state, state/runs, state/mail.
	for _, sub := range []string{"state", filepath.Join("state", "runs"), filepath.Join("state", "mail")} {
		t.Run(sub, func(t *testing.T) {
			dir := newRun(t, "r1", "t1")
			moved := filepath.Join(t.TempDir(), "moved")
			if err := os.Rename(filepath.Join(dir, ".crew", sub), moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, filepath.Join(dir, ".crew", sub)); err != nil {
				t.Fatal(err)
			}
			before := takeImage(t, moved)
			for _, args := range [][]string{
				{"steer", "t1", "through the link?", "--run", "r1"},
				{"run", "create", "--id", "r8"},
				{"mail", "send", "--to", "zed", "--create-recipient", "hi"},
			} {
				if res := runCrew(t, dir, args...); res.Code != exitTampered || !strings.Contains(res.Stderr, "symbolic link") {
					t.Errorf("%s with .crew/%s a symbolic link: exit %d, want %d naming the link\n%s", strings.Join(args, " "), sub, res.Code, exitTampered, res.Stderr)
				}
			}
			assertSameImage(t, "writes through .crew/"+sub, moved, before)
		})
	}
}

// TestSymlinkedFilesAreNotWrittenThrough: the log, a mailbox file,
// tasks.json or run.lock replaced by a symbolic link to a file elsewhere
// (or to nowhere): crew never writes into, or creates, the link's target.
func TestSymlinkedFilesAreNotWrittenThrough(t *testing.T) {
	for _, name := range []string{"events.jsonl", filepath.Join("mailbox", "steering.jsonl"), "tasks.json"} {
		t.Run(filepath.Base(name), func(t *testing.T) {
			dir := newRun(t, "r1", "t1")
			crew(t, dir, "steer", "t1", "first", "--run", "r1")
			p := filepath.Join(runDir(dir, "r1"), name)
			target := filepath.Join(t.TempDir(), "victim")
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(target, data, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Remove(p)
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			runCrew(t, dir, "steer", "t1", "second", "--run", "r1")
			runCrew(t, dir, "repair", "r1")
			if now, _ := os.ReadFile(target); !bytes.Equal(now, data) {
				t.Errorf("crew wrote through the symbolic link %s into %s:\n%s", name, target, now)
			}
		})
	}
	// A dangling link is not followed to create its target either.
	for _, name := range []string{"run.lock", "events.jsonl", filepath.Join("mailbox", "inbox.jsonl")} {
		t.Run("dangling "+filepath.Base(name), func(t *testing.T) {
			dir := newRun(t, "r1", "t1")
			p := filepath.Join(runDir(dir, "r1"), name)
			target := filepath.Join(t.TempDir(), "victim")
			os.Remove(p)
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			runCrew(t, dir, "follow-up", "t1", "x", "--run", "r1")
			runCrew(t, dir, "repair", "r1")
			if _, err := os.Lstat(target); err == nil {
				t.Errorf("crew created %s through the dangling symbolic link %s", target, name)
			}
		})
	}
}

// TestFileModes: every file crew creates is 0600 and every directory 0700
// (whatever the umask), and with --shared-group 0660 and 2770 (setgid, so
// the group is inherited).
func TestFileModes(t *testing.T) {
	for _, c := range []struct {
		name      string
		umask     string
		flags     []string
		file, dir os.FileMode
	}{
		{"private umask 000", "000", nil, 0o600, 0o700},
		{"private umask 022", "022", nil, 0o600, 0o700},
		{"shared-group umask 077", "077", []string{"--shared-group"}, 0o660, 0o770 | os.ModeSetgid},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			sh := func(args ...string) {
				t.Helper()
				cmd := exec.Command("sh", "-c", `umask "$0"; exec "$@"`, c.umask, crewBin)
				cmd.Args = append(cmd.Args, append(c.flags, args...)...)
				cmd.Dir = dir
				cmd.Env = crewEnv()
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("crew %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
			sh("init", "--dir", filepath.Join(dir, ".crew")) // the .crew itself named: made with crew's mode too
			sh("run", "create", "--id", "r1")
			sh("task", "add", "t1", "--run", "r1")
			sh("task", "start", "t1", "--run", "r1")
			sh("ask", "q?", "--run", "r1", "--task", "t1")
			sh("respond", "t1", "a", "--run", "r1")
			sh("broadcast", "all", "--run", "r1")
			sh("inbox", "--run", "r1", "--task", "t1")
			sh("mail", "send", "--to", "stranger", "--create-recipient", "hi")
			sh("mail", "archive", "--older-than", "0s", "--include-unread")
			appendLines(t, filepath.Join(runDir(dir, "r1"), "events.jsonl"), []byte("garbage"))
			sh("repair", "r1") // quarantine file, rewritten log and projections
			n := 0
			filepath.Walk(filepath.Join(dir, ".crew"), func(p string, fi os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				n++
				want := c.file
				if fi.IsDir() {
					want = os.ModeDir | c.dir
				}
				if got := fi.Mode() & (os.ModeType | os.ModePerm | os.ModeSetgid); got != want {
					t.Errorf("%s: mode %v, want %v", p, got, want)
				}
				return nil
			})
			if n < 20 {
				t.Errorf("only %d files and directories checked", n)
			}
		})
	}
}

// hostileBody is text with everything a body may hold that a careless
// program mangles: multi-byte UTF-8, a NUL, terminal escape sequences
// (clear screen, set title, a C1 CSI), a BiDi override, JSON's special
// characters, U+2028, CRLF and a missing final newline.
const hostileBody = "héllo 世界 🚀\x00 nul\x1b[2J\x1b]0;pwned\x07 \u009b31m \u202egnp.exe\u202c \"quoted\" \\back\\slash </script> \u2028 line sep\r\nwindows line\nlast line"

// TestControlCharactersEscapedInHumanOutputExactInJSON: a body (and a
// task title) with control characters and escape sequences is stored
// exactly, printed escaped by every human view (no raw ESC, BEL or NUL
// reaches the terminal) and exactly in --json.
func TestControlCharactersEscapedInHumanOutputExactInJSON(t *testing.T) {
	dir := newRun(t, "r1", "t1")
	crew(t, dir, "task", "add", "t2", "--title", "title \x1b[31mred\x1b[0m", "--run", "r1")
	crew(t, dir, "task", "start", "t1", "--run", "r1")
	res := runCrewIn(t, dir, []byte(hostileBody), nil, "ask", "-", "--run", "r1", "--task", "t1", "--json")
	if res.Code != 0 {
		t.Fatalf("ask: exit %d\n%s", res.Code, res.Stderr)
	}
	var q struct{ ID, Body string }
	if err := json.Unmarshal([]byte(res.Stdout), &q); err != nil || q.Body != hostileBody {
		t.Fatalf("ask --json did not give the body back exactly: %q (%v)", q.Body, err)
	}
	res = runCrewIn(t, dir, []byte(hostileBody), nil, "mail", "send", "--to", "t1", "--subject", "subj \x1b[2J", "-")
	if res.Code != 0 {
		t.Fatalf("mail send: exit %d\n%s", res.Code, res.Stderr)
	}
	mailID := strings.TrimSpace(res.Stdout)

	for _, args := range [][]string{
		{"outbox", "--run", "r1", "--unread"},
		{"pending", "--run", "r1"},
		{"events", "--run", "r1"},
		{"task", "list", "--run", "r1"},
		{"task", "show", "t2", "--run", "r1"},
		{"mail", "check", "t1"},
		{"mail", "read", "t1", mailID},
		{"mail", "check", "leader"}, // the question's copy: its subject names it, no body shown
	} {
		res := runCrew(t, dir, args...)
		if res.Code != 0 {
			t.Errorf("%s: exit %d\n%s", strings.Join(args, " "), res.Code, res.Stderr)
		}
		for _, out := range []string{res.Stdout, res.Stderr} {
			for _, b := range out {
				if (b < 0x20 && b != '\n' && b != '\t') || b == 0x7f || (b >= 0x80 && b < 0xa0) || b == 0x202e {
					t.Errorf("%s: human output holds the raw control character %U:\n%q", strings.Join(args, " "), b, out)
					break
				}
			}
		}
		if !strings.Contains(res.Stdout, `\x1b`) && args[0] != "pending" && args[len(args)-1] != "leader" {
			t.Errorf("%s: the escape sequence is not shown escaped:\n%s", strings.Join(args, " "), res.Stdout)
		}
	}
	// --json is exact.
	out := crew(t, dir, "outbox", "--run", "r1", "--json")
	if recs := jsonRecords(t, out); len(recs) != 1 || recs[0]["body"] != hostileBody {
		t.Errorf("outbox --json changed the body: %q", out)
	}
	out = crew(t, dir, "mail", "read", "t1", mailID, "--json")
	if recs := jsonRecords(t, out); len(recs) != 1 || recs[0]["body"] != hostileBody || recs[0]["subject"] != "subj \x1b[2J" {
		t.Errorf("mail read --json changed the body or subject: %q", out)
	}
	out = crew(t, dir, "task", "show", "t2", "--run", "r1", "--json")
	if recs := jsonRecords(t, out); len(recs) != 1 || recs[0]["title"] != "title \x1b[31mred\x1b[0m" {
		t.Errorf("task show --json changed the title: %q", out)
	}
}

// TestBodyLimitAndEncoding: a body of exactly the limit is accepted and
// reads back whole; one byte more, or a body that is not valid UTF-8 (as
// an argument or on stdin, for messages, mail and task titles), is refused
// with exit 2, a message saying why, and nothing written.
func TestBodyLimitAndEncoding(t *testing.T) {
	dir := newRun(t, "r1", "t1")
	crew(t, dir, "task", "start", "t1", "--run", "r1")
	state := filepath.Join(dir, ".crew")
	limit := 1 << 20 // the default --max-body
	at := bytes.Repeat([]byte("é"), limit/2)
	over := append(append([]byte(nil), at...), '!')

	before := takeImage(t, state)
	for _, c := range []struct {
		name  string
		stdin []byte
		args  []string
		why   string
	}{
		{"steer over the limit", over, []string{"steer", "t1", "-", "--run", "r1"}, "over the limit"},
		{"ask over a small --max-body", []byte("12345678901"), []string{"ask", "-", "--max-body", "10", "--run", "r1", "--task", "t1"}, "over the limit"},
		{"mail over the limit", over, []string{"mail", "send", "--to", "t1", "-"}, "over the limit"},
		{"steer invalid UTF-8 on stdin", []byte("bad \xff\xfe byte"), []string{"steer", "t1", "-", "--run", "r1"}, "UTF-8"},
		{"steer invalid UTF-8 argument", nil, []string{"steer", "t1", "bad \xc3\x28", "--run", "r1"}, "UTF-8"},
		{"report cut in a rune", []byte("cut \xe4\xb8"), []string{"report", "-", "--run", "r1", "--task", "t1"}, "UTF-8"},
		{"mail invalid UTF-8", []byte("\xff"), []string{"mail", "send", "--to", "t1", "-"}, "UTF-8"},
		{"mail subject invalid UTF-8", nil, []string{"mail", "send", "--to", "t1", "--subject", "\xff", "ok"}, "UTF-8"},
		{"task title invalid UTF-8", nil, []string{"task", "add", "t2", "--title", "bad \xff", "--run", "r1"}, "UTF-8"},
		{"run title invalid UTF-8", nil, []string{"run", "create", "--id", "r2", "--title", "bad \xff"}, "UTF-8"},
		{"fail reason invalid UTF-8", nil, []string{"task", "fail", "t1", "--reason", "bad \xff", "--run", "r1"}, "UTF-8"},
	} {
		res := runCrewIn(t, dir, c.stdin, nil, c.args...)
		if res.Code != exitInvalid || !strings.Contains(res.Stderr, c.why) {
			t.Errorf("%s: exit %d, want %d saying %q\n%s", c.name, res.Code, exitInvalid, c.why, res.Stderr)
		}
	}
	assertSameImage(t, "refused bodies", state, before)

	res := runCrewIn(t, dir, at, nil, "steer", "t1", "-", "--run", "r1")
	if res.Code != 0 {
		t.Fatalf("steer of exactly the limit: exit %d\n%s", res.Code, res.Stderr)
	}
	out := crew(t, dir, "inbox", "--json", "--run", "r1", "--task", "t1")
	if recs := jsonRecords(t, out); len(recs) != 1 || recs[0]["body"] != string(at) {
		t.Errorf("a body of exactly the limit did not read back whole")
	}
}

// TestLargeBodyRoundTrips: a 900 KiB body (far over bufio.Scanner's 64 KiB
// line limit) of mixed text reads back byte for byte through every path:
// inbox, events, the mailbox file, the mail-tree copy, mail read, and a
// blocked ask --wait woken by the response.
func TestLargeBodyRoundTrips(t *testing.T) {
	dir := newRun(t, "r1", "t1")
	crew(t, dir, "task", "start", "t1", "--run", "r1")
	var b strings.Builder
	for i := 0; b.Len() < 900<<10; i++ {
		fmt.Fprintf(&b, "%06d %s\n", i, hostileBody)
	}
	body := b.String()[:900<<10]
	for !utf8.ValidString(body) { // do not end inside a rune
		body = body[:len(body)-1]
	}

	check := func(what, got string) {
		t.Helper()
		if got != body {
			t.Errorf("%s: body of %d bytes came back as %d bytes (first difference at %d)", what, len(body), len(got), firstDiff(got, body))
		}
	}
	res := runCrewIn(t, dir, []byte(body), nil, "steer", "t1", "-", "--run", "r1", "--json")
	if res.Code != 0 {
		t.Fatalf("steer: exit %d\n%s", res.Code, res.Stderr)
	}
	var sent struct{ ID, Body string }
	json.Unmarshal([]byte(res.Stdout), &sent)
	check("steer --json", sent.Body)

	for _, rec := range jsonRecords(t, crew(t, dir, "inbox", "--json", "--run", "r1", "--task", "t1")) {
		check("inbox --json", rec["body"].(string))
	}
	for _, rec := range jsonRecords(t, crew(t, dir, "events", "--json", "--run", "r1", "--type", "message.sent")) {
		check("events --json", rec["message"].(map[string]any)["body"].(string))
	}
	for _, l := range logLines(t, filepath.Join(runDir(dir, "r1"), "mailbox", "steering.jsonl")) {
		var m struct{ Body string }
		json.Unmarshal(l, &m)
		check("steering.jsonl", m.Body)
	}
	for _, rec := range jsonRecords(t, crew(t, dir, "mail", "read", "t1", sent.ID, "--json")) {
		check("mail read --json", rec["body"].(string))
	}
	res = runCrewIn(t, dir, []byte(body), nil, "mail", "send", "--to", "t1", "-", "--json")
	var mail struct{ ID string }
	json.Unmarshal([]byte(res.Stdout), &mail)
	for _, rec := range jsonRecords(t, crew(t, dir, "mail", "read", "t1", mail.ID, "--json")) {
		check("mail send + read --json", rec["body"].(string))
	}

	// ask --wait, answered with the large body.
	ask := exec.Command(crewBin, "ask", "which?", "--wait", "--timeout", "60s", "--json", "--run", "r1", "--task", "t1")
	ask.Dir, ask.Env = dir, crewEnv()
	var out bytes.Buffer
	ask.Stdout = &out
	if err := ask.Start(); err != nil {
		t.Fatal(err)
	}
	defer ask.Process.Kill()
	for i := 0; !strings.Contains(crew(t, dir, "task", "show", "t1", "--run", "r1", "--json"), `"status":"waiting"`); i++ {
		if i > 3000 {
			t.Fatal("the worker never got to waiting")
		}
		time.Sleep(10 * time.Millisecond) // setup: wait for the asking process to commit
	}
	res = runCrewIn(t, dir, []byte(body), nil, "respond", "t1", "-", "--run", "r1")
	if res.Code != 0 {
		t.Fatalf("respond: exit %d\n%s", res.Code, res.Stderr)
	}
	if err := ask.Wait(); err != nil {
		t.Fatalf("ask --wait: %v", err)
	}
	var resp struct{ Body string }
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
		t.Fatalf("ask --wait --json: %v", err)
	}
	check("ask --wait --json", resp.Body)
}

func firstDiff(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestTenThousandTasks: a run with 10,000 tasks (its log and mailboxes
// written directly: adding them one process at a time costs O(tasks) each,
// too slow for a test)
// is read and written normally: task list shows them all, a task deep in
// the list can be started, steered and read, a broadcast reaches every
// one, pending works and seq stays dense.
func TestTenThousandTasks(t *testing.T) {
	dir := newRun(t, "r1")
	rd := runDir(dir, "r1")
	logPath := filepath.Join(rd, "events.jsonl")
	const n = 10000
	var buf bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&buf, `{"seq":%d,"at":"2026-11-29T21:04:05.123Z","type":"task.created","run":"r1","task":"t%05d","actor":"leader","to":"pending","data":{"agent":"t%05d"}}`+"\n", i+1, i, i)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(buf.Bytes())
	f.Close()
	os.Remove(filepath.Join(rd, "tasks.json"))
	for i := 1; i <= n; i++ { // the mailboxes task add would have made
		if err := os.MkdirAll(filepath.Join(mailDir(dir, fmt.Sprintf("t%05d", i)), "archive"), 0o700); err != nil {
			t.Fatal(err)
		}
	}

	if got := len(jsonRecords(t, crew(t, dir, "task", "list", "--json", "--run", "r1"))); got != n {
		t.Fatalf("task list shows %d tasks, want %d", got, n)
	}
	crew(t, dir, "task", "start", "t09999", "--run", "r1")
	crew(t, dir, "steer", "t09999", "deep in the list", "--run", "r1")
	crew(t, dir, "broadcast", "to everyone", "--run", "r1")
	if recs := jsonRecords(t, crew(t, dir, "inbox", "--json", "--run", "r1", "--task", "t09999")); len(recs) != 2 {
		t.Errorf("t09999's inbox has %d messages, want the steer and the broadcast", len(recs))
	}
	if recs := jsonRecords(t, crew(t, dir, "inbox", "--json", "--run", "r1", "--task", "t00001")); len(recs) != 1 {
		t.Errorf("t00001's inbox has %d messages, want the broadcast", len(recs))
	}
	agents, err := os.ReadDir(filepath.Join(dir, ".crew", "state", "mail"))
	if err != nil || len(agents) < n {
		t.Errorf("the broadcast reached %d mail directories, want %d (%v)", len(agents), n, err)
	}
	if out := crew(t, dir, "pending", "--run", "r1", "--task", "t05000", "--json"); len(jsonRecords(t, out)) != 1 {
		t.Errorf("pending for t05000: %s", out)
	}
	// run.created, the tasks, start, steer, broadcast, two deliveries.
	if got := assertDenseLog(t, logPath); got != 1+n+5 {
		t.Errorf("log has %d events, want %d", got, 1+n+5)
	}
}

// TestMailFileThatIsNotJSON: a mail directory holding a file that is not
// JSON (and one that is a symbolic link): mail check lists every good
// message, names each bad file on stderr and exits 7 (8 while one is a
// symbolic link: the state root was tampered with); reading and archiving
// the good ones still works.
func TestMailFileThatIsNotJSON(t *testing.T) {
	dir := newRoot(t)
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, strings.TrimSpace(crew(t, dir, "mail", "send", "--to", "reviewer", "--create-recipient", fmt.Sprintf("message %d", i))))
	}
	md := mailDir(dir, "reviewer")
	bad := filepath.Join(md, "2026-01-01T00-00-00.000Z-leader-garbage.json")
	if err := os.WriteFile(bad, []byte("this is not JSON {"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(md, "2026-01-01T00-00-01.000Z-leader-link.json")
	if err := os.Symlink("/etc/passwd", link); err != nil {
		t.Fatal(err)
	}
	res := runCrew(t, dir, "mail", "check", "reviewer", "--json")
	if res.Code != exitTampered || !strings.Contains(res.Stderr, bad) || !strings.Contains(res.Stderr, link) {
		t.Errorf("mail check with a symbolic link among the mail: exit %d, want %d naming %s and %s\n%s", res.Code, exitTampered, bad, link, res.Stderr)
	}
	if got := len(jsonRecords(t, res.Stdout)); got != 3 {
		t.Errorf("mail check listed %d messages, want the 3 good ones:\n%s", got, res.Stdout)
	}
	os.Remove(link)
	res = runCrew(t, dir, "mail", "check")
	wantDamaged(t, "mail check (all agents)", res, bad)
	for _, i := range []int{0, 1, 2} {
		if !strings.Contains(res.Stdout, ids[i]) {
			t.Errorf("mail check (all agents) did not list %s:\n%s", ids[i], res.Stdout)
		}
	}
	crew(t, dir, "mail", "read", "reviewer", ids[1])
	crew(t, dir, "mail", "archive", "reviewer", "--older-than", "0s")
	if _, err := os.Stat(bad); err != nil {
		t.Errorf("the bad file was moved or removed: %v", err)
	}
	if data, _ := os.ReadFile(bad); string(data) != "this is not JSON {" {
		t.Errorf("the bad file was changed: %q", data)
	}
}

// TestSharedGroupWritersOfTwoUsers: with --shared-group, processes of two
// users in one group take turns writing a run, and every one of them
// keeps tasks.json current (its spare, made by the other user, is one
// this user cannot chmod: it is replaced, not given up on), and crew
// repair works for both. It needs root, to run crew as two other users.
func TestSharedGroupWritersOfTwoUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run crew as two other users")
	}
	const gid = 4242
	shared, err := os.MkdirTemp("", "crew-shared-group-") // t.TempDir's parent lets no other user in
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	bin := filepath.Join(shared, "crew")
	data, err := os.ReadFile(crewBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(shared, "state")
	if err := os.Mkdir(state, 0o770); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{shared, state} {
		if err := os.Chown(p, 0, gid); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(shared, 0o755)
	os.Chmod(state, os.ModeSetgid|0o770)
	as := func(uid uint32, args ...string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--shared-group", "--dir", filepath.Join(state, ".crew")}, args...)...)
		cmd.Dir = state
		cmd.Env = crewEnv("CREW_RUN=r1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("crew %s as uid %d: %v\n%s", strings.Join(args, " "), uid, err, out)
		}
	}
	as(4201, "init")
	as(4201, "run", "create", "--id", "r1")
	as(4201, "task", "add", "t1")
	for i, uid := range []uint32{4201, 4202, 4201, 4202, 4202, 4201} {
		as(uid, "steer", "t1", fmt.Sprintf("steer %d", i))
		snap, err := os.ReadFile(filepath.Join(state, ".crew", "state", "runs", "r1", "tasks.json"))
		if err != nil {
			t.Fatal(err)
		}
		var st struct{ Seq int64 }
		if err := json.Unmarshal(bytes.TrimSpace(snap), &st); err != nil || st.Seq != int64(3+i) {
			t.Fatalf("after steer %d by uid %d, tasks.json is at seq %d (%v), want %d", i, uid, st.Seq, err, 3+i)
		}
	}
	as(4202, "repair", "r1")
	as(4201, "repair", "r1")
}

// TestSnapshotThatIsNoFile: tasks.json, open.jsonl or the projection
// mark projected.json replaced by a FIFO (whose open would block), a link
// to /dev/zero (whose reading never ends) or a directory is not read:
// readers and writers rebuild the state from the log, and neither hangs
// nor fails.
func TestSnapshotThatIsNoFile(t *testing.T) {
	for _, name := range []string{"tasks.json", "open.jsonl", "projected.json"} {
		for _, kind := range []string{"fifo", "dev-zero", "dir"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				dir := newRun(t, "r1", "t1")
				crew(t, dir, "steer", "t1", "first", "--run", "r1")
				p := filepath.Join(runDir(dir, "r1"), name)
				os.Remove(p)
				var err error
				switch kind {
				case "fifo":
					err = syscall.Mkfifo(p, 0o600)
				case "dev-zero":
					err = os.Symlink("/dev/zero", p)
				case "dir":
					err = os.Mkdir(p, 0o700)
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, args := range [][]string{{"task", "list", "--json"}, {"steer", "t1", "second"}, {"inbox", "--task", "t1", "--json"}} {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					cmd := exec.CommandContext(ctx, crewBin, append(args, "--run", "r1")...)
					cmd.Dir, cmd.Env = dir, crewEnv()
					out, err := cmd.CombinedOutput()
					timedOut := ctx.Err() != nil
					cancel()
					if timedOut {
						t.Fatalf("crew %s with %s a %s: still running after 20 s", strings.Join(args, " "), name, kind)
					}
					if err != nil {
						t.Fatalf("crew %s with %s a %s: %v\n%s", strings.Join(args, " "), name, kind, err, out)
					}
				}
				if out := crew(t, dir, "inbox", "--task", "t1", "--json", "--run", "r1"); !strings.Contains(out, `"body":"second"`) {
					t.Errorf("the second steer is not in the inbox:\n%s", out)
				}
			})
		}
	}
}
