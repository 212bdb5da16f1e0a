package report

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// nasty is a body with everything that breaks naive renderers: mermaid's
// line enders and comment starters, a directive, quotes, HTML, markdown
// links and images, table pipes, math, a terminal escape, a C1 control, a
// bidi override, a line separator, newlines and tabs.
const nasty = "Which DB; \"pg\" or #sqlite? %%{init: {'theme':'dark'}}%% <img src=x onerror=alert(1)> " +
	"[click](http://x) ![i](http://x/i.png) a|b `code` $x^2$ *b* _i_ \x1b[31mred\u0085 \u202eevil\u2028line\nnext\tline ]]> end"

type fixture struct {
	r   *run.Run
	ctx context.Context
}

func (f *fixture) must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) send(t *testing.T, kind, task, from, body string) *events.Message {
	t.Helper()
	m, err := f.r.Send(f.ctx, run.SendOptions{Kind: kind, Task: task, From: from, Body: body})
	f.must(t, err)
	return m
}

func (f *fixture) move(t *testing.T, id string, op task.Op, reason string) {
	t.Helper()
	_, err := f.r.Transition(f.ctx, id, op, "leader", reason, nil)
	f.must(t, err)
}

// newFixture makes a run with every outcome: t1 completed with a check
// after asking and being answered; "end" (a mermaid keyword) failed;
// "opt-1" cancelled; t4 waiting on a question; t5 whose question timed
// out; a broadcast to the open tasks; a rejected steer.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	root, err := run.Init(dir, crew.PrivatePerm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() }) // snapshots still being written, before TempDir goes
	r, err := root.Create(run.CreateOptions{ID: "r1", Title: "fix | the *build*", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{r: r, ctx: context.Background()}
	for _, id := range []string{"t1", "end", "opt-1", "t4", "t5"} {
		spec := state.TaskSpec{}
		if id == "t1" {
			spec = state.TaskSpec{Agent: "tester", DoneWhen: "echo checked"}
		}
		_, err := r.AddTask(f.ctx, id, spec, "leader")
		f.must(t, err)
	}
	for _, id := range []string{"t1", "end", "t4", "t5"} {
		f.move(t, id, task.Start, "")
	}
	f.send(t, events.KindQuestion, "t1", "tester", nasty)
	_, err = r.Inbox(f.ctx, run.Leader, run.InboxOptions{}) // the leader reads it: delivered
	f.must(t, err)
	f.send(t, events.KindResponse, "t1", "leader", "Use Postgres.")
	f.send(t, events.KindReport, "t1", "tester", "All green | <b>12</b> tests")
	_, _, err = r.Complete(f.ctx, "t1", "tester", run.CompleteOptions{})
	f.must(t, err)
	f.send(t, events.KindMessage, events.Broadcast, "leader", "heads up")
	st := f.send(t, events.KindSteer, "end", "leader", "go left")
	f.must(t, r.Acknowledge(f.ctx, "end", []string{st.ID}, true, "cannot: no <time>"))
	f.move(t, "end", task.Fail, "no <time>\nat all")
	f.move(t, "opt-1", task.Cancel, "not needed")
	q5 := f.send(t, events.KindQuestion, "t5", "t5", "Anyone there?")
	_, err = r.AskTimedOut(f.ctx, "t5", q5.ID, "t5")
	f.must(t, err)
	f.send(t, events.KindQuestion, "t4", "t4", "Which port?\nOr socket?")
	return f
}

func load(t *testing.T, f *fixture, o Options) *Report {
	t.Helper()
	rep, err := Load(f.r, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestLoadStatusesAndTimings(t *testing.T) {
	f := newFixture(t)
	rep := load(t, f, Options{})
	st, err := f.r.State()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Seq != st.Seq || rep.Summary != "3/5 done · 1 running · 1 waiting · 1 failed · 1 cancelled" {
		t.Fatalf("seq %d (state %d), summary %q", rep.Seq, st.Seq, rep.Summary)
	}
	var qs []string
	for _, m := range rep.Messages {
		if m.Kind == events.KindQuestion {
			qs = append(qs, m.Task+"="+m.Status)
		}
	}
	if strings.Join(qs, " ") != "t1=acknowledged t5=rejected t4=pending" {
		t.Errorf("question statuses: %v", qs)
	}
	// A broadcast is one copy per open task, each with its own status.
	var copies []string
	for _, m := range rep.Messages {
		if m.Kind == events.KindMessage {
			if m.Task != events.Broadcast {
				t.Errorf("broadcast copy has task %q", m.Task)
			}
			copies = append(copies, m.To)
		}
	}
	if strings.Join(copies, ",") != "end,opt-1,t4,t5" {
		t.Errorf("broadcast copies to %v, want end,opt-1,t4,t5 (the tasks open when it was sent)", copies)
	}
	for _, m := range rep.Messages {
		switch {
		case m.Kind == events.KindSteer:
			if m.Status != events.StatusRejected || m.RejectedAt == nil || m.Reason != "cannot: no <time>" {
				t.Errorf("rejected steer: %+v", m)
			}
		case m.Kind == events.KindQuestion && m.Task == "t1":
			if m.DeliveredAt == nil || m.AcknowledgedAt == nil || m.Body != nasty {
				t.Errorf("answered question: %+v", m)
			}
		case m.Kind == events.KindQuestion && m.Task == "t5":
			if m.Reason != "no response before the timeout" {
				t.Errorf("timed-out question: reason %q", m.Reason)
			}
		}
	}
	byID := map[string]*Task{}
	for _, tk := range rep.Tasks {
		byID[tk.ID] = tk
	}
	t1 := byID["t1"]
	if t1.Check == nil || t1.Check.ExitCode != 0 || t1.Check.Output != "checked\n" {
		t.Errorf("t1 check: %+v", t1.Check)
	}
	if t1.Result != "All green | <b>12</b> tests" || t1.Messages != 3 || t1.Questions != 1 {
		t.Errorf("t1: result %q, %d messages, %d questions", t1.Result, t1.Messages, t1.Questions)
	}
	// Durations come from the log's own times: the task's start and end
	// events, the question and its response.
	evs := readLog(t, f.r)
	want1 := secs(evs.at(t, "t1", events.TaskCompleted).Sub(evs.at(t, "t1", events.TaskStarted).Time))
	if t1.Seconds != want1 {
		t.Errorf("t1 took %v s, log says %v", t1.Seconds, want1)
	}
	waited := secs(evs.at(t, "t1", events.TaskResponded).Sub(evs.at(t, "t1", events.TaskWaiting).Time))
	if t1.WaitingSeconds != waited {
		t.Errorf("t1 waited %v s, log says %v", t1.WaitingSeconds, waited)
	}
	if byID["opt-1"].Seconds != 0 || byID["opt-1"].StartedAt != nil {
		t.Errorf("a task never started has no duration: %+v", byID["opt-1"])
	}
	if rep.Timings.EndedAt != nil {
		t.Errorf("run has an open task but an end time")
	}
	if rep.question(byID["t4"]) == nil || rep.question(byID["t4"]).Body != "Which port?\nOr socket?" {
		t.Errorf("t4's open question not found")
	}
	var kinds []string
	for _, k := range rep.Counts {
		kinds = append(kinds, k.Kind+"="+strconv.Itoa(k.Messages))
		if k.Messages != k.Pending+k.Delivered+k.Acknowledged+k.Rejected {
			t.Errorf("counts of %s do not add up: %+v", k.Kind, k)
		}
	}
	if strings.Join(kinds, " ") != "question=3 response=1 steer=1 report=1 message=4 failure=1 timeout=1" {
		t.Errorf("counts: %v", kinds)
	}
	if err := rep.Err(); err != nil {
		t.Errorf("healthy log: %v", err)
	}
}

type logEvents []events.Event

func readLog(t *testing.T, r *run.Run) logEvents {
	t.Helper()
	c, err := events.Read(filepath.Join(r.Dir(), "events.jsonl"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out logEvents
	for {
		e, err := c.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
}

func (l logEvents) at(t *testing.T, taskID, typ string) events.Time {
	t.Helper()
	for _, e := range l {
		if e.Task == taskID && e.Type == typ {
			return e.At
		}
	}
	t.Fatalf("no %s for %s in the log", typ, taskID)
	return events.Time{}
}

// The report reflects one seq: events appended after the state was read
// are not half-included.
func TestLoadStopsAtStateSeq(t *testing.T) {
	f := newFixture(t)
	rep := load(t, f, Options{})
	f.send(t, events.KindSteer, "t4", "leader", "late")
	for _, m := range rep.Messages {
		if m.Body == "late" {
			t.Fatal("a message after the report's seq is in it")
		}
	}
	rep2 := load(t, f, Options{})
	if rep2.Seq != rep.Seq+1 || rep2.Messages[len(rep2.Messages)-1].Body != "late" {
		t.Fatalf("second report: seq %d, last %q", rep2.Seq, rep2.Messages[len(rep2.Messages)-1].Body)
	}
}

func TestLoadDamagedLog(t *testing.T) {
	f := newFixture(t)
	fh, err := os.OpenFile(filepath.Join(f.r.Dir(), "events.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString("{\"seq\": oops\n")
	fh.Close()
	rep := load(t, f, Options{})
	if len(rep.Damage) != 1 || !errors.Is(rep.Err(), crew.ErrDamaged) {
		t.Fatalf("damage %v, err %v", rep.Damage, rep.Err())
	}
	if len(rep.Tasks) != 5 || len(rep.Messages) == 0 {
		t.Fatalf("the readable part is missing: %d tasks, %d messages", len(rep.Tasks), len(rep.Messages))
	}
	var b bytes.Buffer
	if err := Render(&b, f.r, FormatMarkdown); !errors.Is(err, crew.ErrDamaged) {
		t.Fatalf("Render of a damaged log: %v", err)
	}
	if !strings.Contains(b.String(), "[!WARNING]") || !strings.Contains(b.String(), "| `t1` |") {
		t.Fatalf("markdown of a damaged log:\n%s", b.String())
	}
}

// JUnit XML as CI readers parse it.
type (
	xSuites struct {
		XMLName  xml.Name `xml:"testsuites"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Errors   int      `xml:"errors,attr"`
		Suites   []xSuite `xml:"testsuite"`
	}
	xSuite struct {
		Name       string      `xml:"name,attr"`
		Tests      int         `xml:"tests,attr"`
		Failures   int         `xml:"failures,attr"`
		Errors     int         `xml:"errors,attr"`
		Skipped    int         `xml:"skipped,attr"`
		Time       float64     `xml:"time,attr"`
		Properties []xProperty `xml:"properties>property"`
		Cases      []xCase     `xml:"testcase"`
	}
	xProperty struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	}
	xCase struct {
		Name      string    `xml:"name,attr"`
		Classname string    `xml:"classname,attr"`
		Time      float64   `xml:"time,attr"`
		Failure   *xOutcome `xml:"failure"`
		Error     *xOutcome `xml:"error"`
		Skipped   *xOutcome `xml:"skipped"`
		SystemOut string    `xml:"system-out"`
	}
	xOutcome struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
)

func TestJUnit(t *testing.T) {
	f := newFixture(t)
	var b bytes.Buffer
	if err := load(t, f, Options{}).JUnit(&b); err != nil {
		t.Fatal(err)
	}
	out := b.Bytes()
	checkJUnitSchema(t, out)
	var s xSuites
	if err := xml.Unmarshal(out, &s); err != nil {
		t.Fatalf("not XML: %v\n%s", err, out)
	}
	if len(s.Suites) != 1 {
		t.Fatalf("%d suites, want one per run", len(s.Suites))
	}
	suite := s.Suites[0]
	if suite.Name != "crew run r1" || suite.Tests != 5 || suite.Failures != 1 || suite.Errors != 2 || suite.Skipped != 1 ||
		s.Tests != 5 || s.Failures != 1 || s.Errors != 2 {
		t.Errorf("suite %s: tests %d failures %d errors %d skipped %d", suite.Name, suite.Tests, suite.Failures, suite.Errors, suite.Skipped)
	}
	var names []string
	cases := map[string]xCase{}
	for _, c := range suite.Cases {
		names = append(names, c.Name)
		cases[c.Name] = c
		if c.Classname != "r1" || c.Time < 0 {
			t.Errorf("case %s: classname %q time %v", c.Name, c.Classname, c.Time)
		}
	}
	if strings.Join(names, " ") != "t1 end opt-1 t4 t5" {
		t.Errorf("cases %v", names)
	}
	if c := cases["t1"]; c.Failure != nil || c.Error != nil || c.Skipped != nil {
		t.Errorf("completed task has an outcome: %+v", c)
	}
	// The thread, decoded, holds the bodies: XML-special characters
	// intact, characters XML cannot hold replaced, never raw.
	sysout := cases["t1"].SystemOut
	for _, want := range []string{"question  tester -> leader  [acknowledged]", "\"pg\" or #sqlite?", "<img src=x onerror=alert(1)>", "]]> end",
		"response  leader -> t1  [pending]\n    Use Postgres.", "done-when check \"echo checked\" exited 0", "    checked"} {
		if !strings.Contains(sysout, want) {
			t.Errorf("t1's system-out lacks %q:\n%s", want, sysout)
		}
	}
	// Control and bidi characters are escaped as the terminal shows them.
	if strings.ContainsAny(sysout, "\x1b\u0085\u202e\u2028") || !strings.Contains(sysout, `\x1b[31mred\u0085 \u202eevil\u2028line`) {
		t.Errorf("control and bidi characters must be escaped as in the terminal: %q", sysout)
	}
	if c := cases["end"]; c.Failure == nil || c.Failure.Type != "failed" || c.Failure.Message != "no <time> …" || c.Failure.Text != "no <time>\nat all" {
		t.Errorf("failed task: %+v", c.Failure)
	}
	if c := cases["opt-1"]; c.Skipped == nil || c.Skipped.Message != "not needed" {
		t.Errorf("cancelled task: %+v", c.Skipped)
	}
	if c := cases["t4"]; c.Error == nil || c.Error.Type != "waiting" || !strings.Contains(c.Error.Message, "it asks: Which port? …") {
		t.Errorf("waiting task: %+v", c.Error)
	}
	if c := cases["end"]; !strings.Contains(c.SystemOut, "steer  leader -> end  [rejected]  reason: cannot: no <time>") {
		t.Errorf("rejected steer in end's thread:\n%s", c.SystemOut)
	}
	props := map[string]string{}
	for _, p := range suite.Properties {
		props[p.Name] = p.Value
	}
	if props["title"] != "fix | the *build*" || props["run"] != "r1" {
		t.Errorf("properties %v", props)
	}
}

// checkJUnitSchema walks the XML and checks it against the shape of the
// Jenkins xunit plugin's junit-10.xsd, the strictest schema JUnit readers
// use: which elements may hold which, and which attributes each may have.
func checkJUnitSchema(t *testing.T, data []byte) {
	t.Helper()
	children := map[string][]string{
		"":           {"testsuites"},
		"testsuites": {"testsuite"},
		"testsuite":  {"testsuite", "properties", "testcase", "system-out", "system-err"},
		"properties": {"property"},
		"testcase":   {"skipped", "error", "failure", "system-out", "system-err"},
	}
	attrs := map[string][]string{
		"testsuites": {"name", "time", "tests", "failures", "errors"},
		"testsuite":  {"name", "tests", "failures", "errors", "group", "time", "skipped", "timestamp", "hostname", "id", "package", "file", "log", "url"},
		"property":   {"name", "value"},
		"testcase":   {"name", "time", "classname", "group"},
		"failure":    {"type", "message"},
		"error":      {"type", "message"},
		"skipped":    {"type", "message"},
	}
	required := map[string][]string{
		"testsuite": {"name", "tests", "failures", "errors"},
		"testcase":  {"name"},
		"property":  {"name", "value"},
	}
	timeRE := regexp.MustCompile(`^(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]*)?$`)
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	stack := []string{""}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			parent, name := stack[len(stack)-1], tk.Name.Local
			if !contains(children[parent], name) {
				t.Errorf("<%s> may not stand in <%s>", name, parent)
			}
			have := map[string]bool{}
			for _, a := range tk.Attr {
				have[a.Name.Local] = true
				if !contains(attrs[name], a.Name.Local) {
					t.Errorf("<%s> may not have attribute %s", name, a.Name.Local)
				}
				if a.Name.Local == "time" && !timeRE.MatchString(a.Value) {
					t.Errorf("<%s time=%q> is not a SUREFIRE_TIME", name, a.Value)
				}
			}
			for _, a := range required[name] {
				if !have[a] {
					t.Errorf("<%s> lacks attribute %s", name, a)
				}
			}
			stack = append(stack, name)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if p := stack[len(stack)-1]; strings.TrimSpace(string(tk)) != "" && (p == "testsuites" || p == "testsuite" || p == "testcase" || p == "properties") {
				t.Errorf("text in <%s>", p)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestJSON(t *testing.T) {
	f := newFixture(t)
	var b bytes.Buffer
	if err := Render(&b, f.r, FormatJSON); err != nil {
		t.Fatal(err)
	}
	if bytes.Count(b.Bytes(), []byte("\n")) != 1 {
		t.Fatalf("json is not one line")
	}
	var got struct {
		Manifest state.Manifest `json:"manifest"`
		Seq      int64
		Tasks    []map[string]any
		Messages []events.Message
		Timings  map[string]any
		Counts   []KindCount
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Manifest.ID != "r1" || len(got.Tasks) != 5 || len(got.Messages) != 12 || got.Timings["createdAt"] == nil || len(got.Counts) != 7 {
		t.Fatalf("json: %d tasks, %d messages, timings %v, %d counts", len(got.Tasks), len(got.Messages), got.Timings, len(got.Counts))
	}
	if got.Tasks[0]["id"] != "t1" || got.Tasks[0]["status"] != "completed" || got.Tasks[0]["check"] == nil || got.Tasks[0]["agent"] != "tester" {
		t.Errorf("task t1 in json: %v", got.Tasks[0])
	}
	if got.Messages[0].Body != nasty {
		t.Errorf("json bodies are exact: %q", got.Messages[0].Body)
	}
}

// Markdown: one table row per task, every cell escaped.
func TestMarkdown(t *testing.T) {
	f := newFixture(t)
	f.send(t, events.KindReport, "t5", "t5", "see [docs](http://x) | ![img](http://x/i.png) <script>x</script> `tick` $$ \\ ~~s~~")
	var b bytes.Buffer
	if err := Render(&b, f.r, FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| `") {
			rows = append(rows, l)
		}
	}
	if len(rows) != 5 {
		t.Fatalf("%d task rows, want 5:\n%s", len(rows), out)
	}
	unescapedPipe := regexp.MustCompile(`(^|[^\\])\|`)
	for _, row := range rows {
		if n := len(unescapedPipe.FindAllString(row, -1)); n != 8 {
			t.Errorf("row has %d cell separators, want 8: %s", n, row)
		}
		if strings.ContainsAny(row, "<>\x1b") || strings.Contains(row, "](") && !strings.Contains(row, `\](`) {
			t.Errorf("row holds raw markup: %s", row)
		}
	}
	for _, want := range []string{
		"| `t1` | `tester` | ✅ completed |", "| 1 | check `echo checked` passed · All green \\| &lt;b&gt;12&lt;/b&gt; tests |",
		"| `end` | `end` | ❌ failed | ", "| no &lt;time&gt; at all |",
		"| `t4` | `t4` | ❓ waiting |", "| asks: Which port? Or socket? |",
		"| `t5` | `t5` | ⏳ running |", "| see \\[docs\\](http://x) \\| \\!\\[img\\](http://x/i.png) &lt;script&gt;x&lt;/script&gt; \\`tick\\` \\$\\$ \\\\ \\~\\~s\\~\\~",
		"| question | 3 | 1 | 0 | 1 | 1 |",
		"```mermaid\nsequenceDiagram\n", "\n```\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(out, "### crew run `r1` — fix \\| the \\*build\\*\n") {
		t.Errorf("heading: %q", strings.SplitN(out, "\n", 2)[0])
	}
}

// Markdown: mermaid's entity codes (#58; for ':') are the diagram's
// alone; the text around it shows the characters, escaped for markdown.
func TestMarkdownEntitiesOnlyInDiagram(t *testing.T) {
	f := newFixture(t)
	f.send(t, events.KindReport, "t5", "t5", `step 2: "done"; 100% #ok`)
	var b bytes.Buffer
	if err := Render(&b, f.r, FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	before, rest, ok := strings.Cut(out, "```mermaid\n")
	diagram, after, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 {
		t.Fatalf("no mermaid block:\n%s", out)
	}
	if e := entity.FindString(before + after); e != "" {
		t.Errorf("mermaid entity %s outside the diagram:\n%s", e, before+after)
	}
	if want := `| step 2: "done"; 100% \#ok |`; !strings.Contains(before, want) {
		t.Errorf("task table lacks %q:\n%s", want, before)
	}
	if want := "T5->>L: report#58; step 2#58; #quot;done#quot;#59; 100#37; #35;ok\n"; !strings.Contains(diagram+"\n", want) {
		t.Errorf("diagram lacks %q:\n%s", want, diagram)
	}
}

func TestCheckFormat(t *testing.T) {
	for _, f := range Formats {
		if CheckFormat(f) != nil {
			t.Errorf("%s refused", f)
		}
	}
	if err := CheckFormat("html"); !errors.Is(err, crew.ErrInvalid) {
		t.Errorf("html: %v", err)
	}
}

func TestCut(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 0, "hello"}, {"hello", 5, "hello"}, {"hello", 4, "hel…"}, {"héllo wörld", 6, "héllo…"},
		{"日本語のテキスト", 3, "日本…"}, {"ab", 1, "…"}, {"", 3, ""},
	} {
		if got := cut(c.in, c.n); got != c.want {
			t.Errorf("cut(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// TestLoadOneTask checks Options.Task: the task alone, its thread (a
// broadcast's copy to it included, other tasks' messages not) and its
// spans; an unknown task is crew.ErrNotFound.
func TestLoadOneTask(t *testing.T) {
	f := newFixture(t)
	rep := load(t, f, Options{Task: "end"})
	if len(rep.Tasks) != 1 || rep.Tasks[0].ID != "end" {
		t.Fatalf("tasks %v, want end alone", rep.Tasks)
	}
	var kinds []string
	for _, m := range rep.Messages {
		if m.Task != "end" && m.To != "end" {
			t.Errorf("a message of another task: %+v", m)
		}
		kinds = append(kinds, m.Kind+"="+m.Status)
	}
	if strings.Join(kinds, " ") != "message=pending steer=rejected failure=pending" {
		t.Errorf("end's thread: %v", kinds)
	}
	// t1 ran, waited for its answer, ran again and completed.
	t1 := load(t, f, Options{Task: "t1"}).Tasks[0]
	var spans []string
	for i, s := range t1.Spans {
		spans = append(spans, string(s.State))
		if s.End.Before(s.Start) {
			t.Errorf("span %d ends (%v) before it starts (%v)", i, s.End, s.Start)
		}
		if i > 0 && !s.Start.Equal(t1.Spans[i-1].End) {
			t.Errorf("span %d starts at %v, not where span %d ends (%v)", i, s.Start, i-1, t1.Spans[i-1].End)
		}
	}
	if strings.Join(spans, " ") != "running waiting running" || !t1.Spans[2].End.Equal(t1.EndedAt.Time) {
		t.Errorf("t1's spans: %+v (ended %v)", t1.Spans, t1.EndedAt)
	}
	if _, err := Load(f.r, Options{Task: "nope"}); !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("an unknown task: %v, want ErrNotFound", err)
	}
}
