package report

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// The rules below come from mermaid's sequence diagram lexer
// (sequenceDiagram.jison) and the text mermaid edits before lexing
// (encodeEntities, directives, comments). A diagram that keeps them
// parses; each rule names what breaks when it is not kept.
var (
	participantLine = regexp.MustCompile(`^    participant ([A-Z][0-9]*) as (.+)$`)
	arrowLine       = regexp.MustCompile(`^    ([A-Z][0-9]*)(->>|-->>)([A-Z][0-9]*): (.*)$`)
	noteLine        = regexp.MustCompile(`^    Note over ([A-Z][0-9]*): (.*)$`)
	entity          = regexp.MustCompile(`#(\w+);`)
	// encodeEntities strips the ';' of "style…:…#…;" and "classDef…" before
	// lexing, which turns an entity back into a '#' that starts a comment.
	styleEdit = regexp.MustCompile(`(style|classDef).*:\S*#.*;`)
	// Participant ids that are safe: L and T1, T2 … Task ids are not (the
	// lexer is case-insensitive and takes keywords first: end, opt, par,
	// and, loop, note, box, alt, else, rect, critical, break, create,
	// destroy, links, link, properties, details, over, activate,
	// deactivate, title, autonumber, off, participant, actor).
	safeID = regexp.MustCompile(`^(L|T[1-9][0-9]*)$`)
)

// checkMermaid fails t unless diagram keeps every rule; it returns the
// decoded texts of the participants and of the arrows and notes, in order.
func checkMermaid(t *testing.T, diagram string) (aliases, texts []string) {
	t.Helper()
	if len(diagram) > MaxDiagram {
		t.Errorf("diagram is %d bytes, over MaxDiagram", len(diagram))
	}
	if !strings.HasSuffix(diagram, "\n") {
		t.Errorf("diagram does not end with a newline")
	}
	lines := strings.Split(strings.TrimSuffix(diagram, "\n"), "\n")
	if lines[0] != "sequenceDiagram" {
		t.Fatalf("first line %q", lines[0])
	}
	declared := map[string]bool{}
	use := func(id, line string) {
		if !declared[id] {
			t.Errorf("participant %s used before it is declared: %q", id, line)
		}
	}
	for _, l := range lines[1:] {
		if styleEdit.MatchString(l) {
			t.Errorf("mermaid would edit this line before lexing: %q", l)
		}
		if strings.Contains(l, "%%") {
			t.Errorf("comment or directive: %q", l)
		}
		switch {
		case participantLine.MatchString(l):
			m := participantLine.FindStringSubmatch(l)
			if !safeID.MatchString(m[1]) || declared[m[1]] {
				t.Errorf("bad or repeated participant id %q", m[1])
			}
			declared[m[1]] = true
			aliases = append(aliases, checkText(t, m[2], l))
		case arrowLine.MatchString(l):
			m := arrowLine.FindStringSubmatch(l)
			use(m[1], l)
			use(m[3], l)
			texts = append(texts, checkText(t, m[4], l))
		case noteLine.MatchString(l):
			m := noteLine.FindStringSubmatch(l)
			use(m[1], l)
			texts = append(texts, checkText(t, m[2], l))
		default:
			t.Errorf("line of no known form: %q", l)
		}
	}
	return aliases, texts
}

// checkText checks a text against the lexer (TXT is ":"[^#\n;]+, and a
// participant alias [^#\n;]*) and returns it decoded as mermaid draws it.
func checkText(t *testing.T, s, line string) string {
	t.Helper()
	bare := entity.ReplaceAllString(s, "")
	if i := strings.IndexAny(bare, "#;%:\"<>&\n\r"); i >= 0 {
		t.Errorf("raw %q in text of %q", bare[i], line)
	}
	for _, r := range bare {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.In(r, unicode.Bidi_Control) {
			t.Errorf("control character %U in %q", r, line)
		}
	}
	return decodeMermaid(s)
}

// decodeMermaid turns entity codes back into characters, as mermaid does
// when it draws.
func decodeMermaid(s string) string {
	named := map[string]string{"quot": `"`, "lt": "<", "gt": ">", "amp": "&"}
	return entity.ReplaceAllStringFunc(s, func(e string) string {
		name := e[1 : len(e)-1]
		if n, err := strconv.Atoi(name); err == nil {
			return string(rune(n))
		}
		if v, ok := named[name]; ok {
			return v
		}
		return "\uFFFD"
	})
}

func TestMermaidFixture(t *testing.T) {
	f := newFixture(t)
	rep := load(t, f, Options{})
	var b bytes.Buffer
	if err := rep.Mermaid(&b); err != nil {
		t.Fatal(err)
	}
	aliases, texts := checkMermaid(t, b.String())
	if got := strings.Join(aliases, ","); got != "leader (leader),t1 (tester),end,opt-1,t4,t5" {
		t.Errorf("participants %s", got)
	}
	want := []string{
		"question: " + cut(oneLine(nasty), ArrowRunes-len("question: ")),
		"response: Use Postgres.",
		"report: All green | <b>12</b> tests",
		"completed",
		"message: heads up", "message: heads up", "message: heads up", "message: heads up",
		"[rejected] steer: go left",
		"failed: no <time> at all",
		"cancelled: not needed",
		"[rejected] question: Anyone there?",
		"question: Which port? Or socket?",
	}
	if strings.Join(texts, "\n") != strings.Join(want, "\n") {
		t.Errorf("texts:\n%s\nwant:\n%s", strings.Join(texts, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(b.String(), "    T1->>L: question") || !strings.Contains(b.String(), "    L-->>T1: response") {
		t.Errorf("arrow directions:\n%s", b.String())
	}
	checkRealMermaid(t, b.String())
}

// Task ids that are mermaid keywords, and agents with odd names.
func TestMermaidKeywordTasks(t *testing.T) {
	dir := t.TempDir()
	root, err := run.Init(dir, crew.PrivatePerm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() }) // snapshots still being written, before TempDir goes
	r, err := root.Create(run.CreateOptions{ID: "end", Leader: "participant", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids := []string{"end", "opt", "alt-1", "par_2", "and", "loop", "Note", "box", "rect", "else", "critical", "break",
		"create", "destroy", "links", "link", "properties", "details", "over", "activate", "deactivate", "title",
		"autonumber", "off", "participant", "actor", "sequenceDiagram", "x", "T1", "L", "1-x", "0"}
	for i, id := range ids {
		agent := ids[(i+1)%len(ids)]
		if agent == "participant" { // the leader's name is no task's agent
			agent = "participant-2"
		}
		if _, err := r.AddTask(ctx, id, state.TaskSpec{Agent: agent}, "participant"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Transition(ctx, id, task.Start, "participant", "", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: id, From: "participant", Body: id + "->>" + id + ": end"}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Load(r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	rep.Mermaid(&b)
	aliases, texts := checkMermaid(t, b.String())
	if len(aliases) != len(ids)+1 || len(texts) != len(ids) {
		t.Fatalf("%d participants, %d arrows", len(aliases), len(texts))
	}
	for i, id := range ids {
		if !strings.HasPrefix(aliases[i+1], id+" (") || texts[i] != "steer: "+id+"->>"+id+": end" {
			t.Errorf("task %s: alias %q, text %q", id, aliases[i+1], texts[i])
		}
	}
	checkRealMermaid(t, b.String())
}

// A long conversation is cut to fit MaxDiagram, and says how much is left
// out.
func TestMermaidCap(t *testing.T) {
	rep := &Report{Manifest: state.Manifest{ID: "r1", Leader: "leader"}, Tasks: []*Task{{Task: &state.Task{ID: "t1", Agent: "t1"}}}}
	for i := 0; i < 2000; i++ {
		rep.Messages = append(rep.Messages, &Message{Seq: int64(i + 3), Task: "t1", Kind: events.KindSteer, Direction: events.Inbox,
			To: "t1", Body: strings.Repeat(`#;"<>`, 20), Status: events.StatusPending})
	}
	var b bytes.Buffer
	rep.Mermaid(&b)
	_, texts := checkMermaid(t, b.String())
	last := texts[len(texts)-1]
	m := regexp.MustCompile(`^(\d+) more not shown \(crew run report --format json has them all\)$`).FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("last line: %q", last)
	}
	if n, _ := strconv.Atoi(m[1]); n+len(texts)-1 != 2000 {
		t.Errorf("%d shown + %s left out != 2000", len(texts)-1, m[1])
	}
	checkRealMermaid(t, b.String())
}

// Bodies made of random pieces of everything the lexer treats specially,
// in both directions: every one keeps the rules and draws as sent.
func TestMermaidRandomBodies(t *testing.T) {
	pieces := []string{"#", ";", "%%", "%%{", "}%%", ":", "\"", "'", "<", ">", "&", "#59;", "&amp;", "->>", "-x", "--)", "+", "-",
		"end", "note", "style", "classDef", " ", "\n", "\t", "\r", "\x00", "\x1b", "\u0085", "\u2028", "\u202e", "wrap:", "<br>",
		"`", "|", "[", "]", "{", "}", "é", "日本", "🙂", "\\", "/", "as", "participant"}
	rng := rand.New(rand.NewPCG(1, 2))
	rep := &Report{Manifest: state.Manifest{ID: "r1", Leader: "leader"}, Tasks: []*Task{{Task: &state.Task{ID: "t1", Agent: "t1"}}}}
	var want []string
	for i := 0; i < 300; i++ {
		var b strings.Builder
		for j := rng.IntN(12); j >= 0; j-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		m := &Message{Seq: int64(i + 3), Task: "t1", Kind: events.KindReport, Direction: events.Outbox, To: "leader", Body: b.String(), Status: events.StatusPending}
		if i%2 == 1 {
			m.Kind, m.Direction, m.To = events.KindFollowUp, events.Inbox, "t1"
		}
		rep.Messages = append(rep.Messages, m)
		want = append(want, cut(oneLine(m.Kind+": "+m.Body), ArrowRunes))
	}
	var b bytes.Buffer
	rep.Mermaid(&b)
	_, texts := checkMermaid(t, b.String())
	if strings.Join(texts, "\n") != strings.Join(want, "\n") {
		t.Errorf("texts differ from the bodies sent")
	}
	checkRealMermaid(t, b.String())
}

func FuzzMermaidText(f *testing.F) {
	for _, s := range []string{"", nasty, "#59;", "a;b#c%%d", "style x:#fff;", "classDef a:#f;", "wrap:x", "\u202e\u2028\x00", "日本語; テキスト"} {
		f.Add(s, 0)
		f.Add(s, 7)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1000 {
			return
		}
		out := mermaidText(s, n)
		line := "    L->>T1: " + out
		if styleEdit.MatchString(line) || strings.Contains(line, "%%") {
			t.Fatalf("mermaid would edit %q", line)
		}
		got := checkText(t, out, line)
		if !utf8.ValidString(s) {
			return // bodies are valid UTF-8 (crew refuses others): safety is all that counts here
		}
		if want := cut(oneLine(s), n); got != want {
			t.Fatalf("mermaidText(%q, %d) draws %q, want %q", s, n, got, want)
		}
	})
}

// checkRealMermaid parses the diagram with mermaid itself when
// CREW_MERMAID_DIR names a directory where `npm install mermaid jsdom` was
// run (the test does not fetch it: tests use no network).
func checkRealMermaid(t *testing.T, diagram string) {
	t.Helper()
	dir := os.Getenv("CREW_MERMAID_DIR")
	if dir == "" {
		return
	}
	script, err := filepath.Abs(filepath.Join("testdata", "mermaid-parse.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "d.mmd")
	if err := os.WriteFile(in, []byte(diagram), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script, in)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mermaid rejects the diagram: %v\n%s\n%s", err, out, diagram)
	}
	// The parser's own texts must be those the checker decoded.
	_, texts := checkMermaid(t, diagram)
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if fmt.Sprint(got) != fmt.Sprint(texts) {
		t.Errorf("mermaid draws:\n%s\nthe checker decoded:\n%s", strings.Join(got, "\n"), strings.Join(texts, "\n"))
	}
}
