package report

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/task"
)

// JUnit XML, as the readers CI systems use understand it (Ant/Surefire's
// format; the Jenkins xunit schema junit-10.xsd is the strictest common
// one): <testsuites> holding one <testsuite> per run, one <testcase> per
// task. Attributes are those the schema allows: testsuites carries name,
// tests, failures, errors and time only.
type (
	junitSuites struct {
		XMLName  xml.Name `xml:"testsuites"`
		Name     string   `xml:"name,attr"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Errors   int      `xml:"errors,attr"`
		Time     string   `xml:"time,attr"`
	}
	junitSuite struct {
		XMLName   xml.Name `xml:"testsuite"`
		Name      string   `xml:"name,attr"`
		Tests     int      `xml:"tests,attr"`
		Failures  int      `xml:"failures,attr"`
		Errors    int      `xml:"errors,attr"`
		Skipped   int      `xml:"skipped,attr"`
		Time      string   `xml:"time,attr"`
		Timestamp string   `xml:"timestamp,attr"`
	}
	junitProperty struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	}
	junitCase struct {
		Name      string        `xml:"name,attr"`
		Classname string        `xml:"classname,attr"`
		Time      string        `xml:"time,attr"`
		Skipped   *junitOutcome `xml:"skipped,omitempty"`
		Error     *junitOutcome `xml:"error,omitempty"`
		Failure   *junitOutcome `xml:"failure,omitempty"`
		SystemOut *junitText    `xml:"system-out,omitempty"`
	}
	junitOutcome struct {
		Message string `xml:"message,attr,omitempty"`
		Type    string `xml:"type,attr,omitempty"`
		Text    string `xml:",innerxml"` // escaped by xmlText
	}
	junitText struct {
		Text string `xml:",innerxml"` // escaped by xmlText
	}
)

// xmlText escapes s as the terminal output does (human.Escape: control
// characters, line separators and bidi controls become \x1b, \u202e),
// then as XML character data (encoding/xml's EscapeText: & < > quotes
// escaped), but keeps newlines as they are, so the text reads naturally
// in the file; only attributes need newlines as references.
func xmlText(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(human.Escape(s)))
	return strings.ReplaceAll(b.String(), "&#xA;", "\n")
}

// JUnit writes the run as JUnit XML: one <testsuite> named after the run,
// one <testcase> per task (name = task id, classname = run id, time = its
// duration in seconds). A failed task has a <failure> with its reason, a
// cancelled one <skipped> with its reason, and a task that has not ended
// an <error> saying so (the run was cut short: run wait timed out). Each
// case's <system-out> holds the task's message thread. Text is escaped
// as the terminal output is (human.Escape), then by encoding/xml.
func (rep *Report) JUnit(w io.Writer) error {
	s := junitSuite{
		Name:      "crew run " + rep.Manifest.ID,
		Time:      seconds(rep.Timings.Seconds),
		Timestamp: rep.Manifest.CreatedAt.UTC().Format("2006-01-02T15:04:05"),
	}
	props := struct {
		List []junitProperty `xml:"property"`
	}{[]junitProperty{
		{"run", rep.Manifest.ID}, {"title", human.Escape(rep.Manifest.Title)}, {"leader", rep.Manifest.Leader},
		{"seq", fmt.Sprint(rep.Seq)}, {"summary", rep.Summary},
	}}
	threads := map[string][]int{} // task id -> indexes into rep.Messages
	for i, m := range rep.Messages {
		id := m.Task
		if id == events.Broadcast {
			id = m.To
		}
		threads[id] = append(threads[id], i)
	}
	var cases []junitCase // without their system-out, made one at a time below
	for _, t := range rep.Tasks {
		cases = append(cases, rep.junitCase(t, &s))
	}
	s.Tests = len(cases)
	all := junitSuites{Name: "crew", Tests: s.Tests, Failures: s.Failures, Errors: s.Errors, Time: s.Time}

	// Streamed: each case with its thread is encoded and dropped before the
	// next, so a long run's threads are never all in memory at once.
	bw := bufio.NewWriter(w)
	bw.WriteString(xml.Header)
	enc := xml.NewEncoder(bw)
	enc.Indent("", "  ")
	suitesStart, err := startOf(all)
	if err != nil {
		return err
	}
	suiteStart, err := startOf(s)
	if err != nil {
		return err
	}
	enc.EncodeToken(suitesStart)
	enc.EncodeToken(suiteStart)
	if err := enc.EncodeElement(props, xml.StartElement{Name: xml.Name{Local: "properties"}}); err != nil {
		return err
	}
	for i, t := range rep.Tasks {
		c := cases[i]
		var msgs []*Message
		for _, j := range threads[t.ID] {
			msgs = append(msgs, rep.Messages[j])
		}
		if out := threadText(t, msgs); out != "" {
			c.SystemOut = &junitText{xmlText(out)}
		}
		if err := enc.EncodeElement(c, xml.StartElement{Name: xml.Name{Local: "testcase"}}); err != nil {
			return err
		}
	}
	enc.EncodeToken(suiteStart.End())
	enc.EncodeToken(suitesStart.End())
	if err := enc.Close(); err != nil {
		return err
	}
	bw.WriteString("\n")
	return bw.Flush()
}

// junitCase is task t's <testcase>, without its thread; it counts the
// case's outcome in s.
func (rep *Report) junitCase(t *Task, s *junitSuite) junitCase {
	c := junitCase{Name: t.ID, Classname: rep.Manifest.ID, Time: seconds(t.Seconds)}
	reason := t.Reason
	switch t.Status {
	case task.Completed:
	case task.Failed:
		if reason == "" {
			reason = "failed (no reason given)"
		}
		c.Failure = &junitOutcome{Message: firstLine(reason), Type: "failed", Text: xmlText(reason)}
		s.Failures++
	case task.Cancelled:
		if reason == "" {
			reason = "cancelled (no reason given)"
		}
		c.Skipped = &junitOutcome{Message: firstLine(reason), Type: "cancelled", Text: xmlText(reason)}
		s.Skipped++
	default:
		msg := fmt.Sprintf("task did not end: it was %s when the report was made", t.Status)
		if q := rep.question(t); q != nil {
			msg += "; it asks: " + firstLine(q.Body)
		}
		c.Error = &junitOutcome{Message: msg, Type: string(t.Status)}
		s.Errors++
	}
	return c
}

// startOf returns the start tag (name and attributes) encoding/xml writes
// for v, a struct of attributes.
func startOf(v any) (xml.StartElement, error) {
	data, err := xml.Marshal(v)
	if err != nil {
		return xml.StartElement{}, err
	}
	tok, err := xml.NewDecoder(bytes.NewReader(data)).Token()
	if err != nil {
		return xml.StartElement{}, err
	}
	start, ok := tok.(xml.StartElement)
	if !ok {
		return xml.StartElement{}, fmt.Errorf("junit: no start element")
	}
	return start, nil
}

// threadText is a task's thread for <system-out>: a header line per
// message and its body, indented; then the task's done-when check.
func threadText(t *Task, msgs []*Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%s  #%d  %s  %s -> %s  [%s]", m.SentAt, m.Seq, m.Kind, m.From, m.To, m.Status)
		if m.Reason != "" {
			fmt.Fprintf(&b, "  reason: %s", firstLine(m.Reason))
		}
		b.WriteString("\n    ")
		b.WriteString(strings.ReplaceAll(strings.TrimRight(m.Body, "\n"), "\n", "\n    "))
		b.WriteString("\n")
	}
	if c := t.Check; c != nil {
		fmt.Fprintf(&b, "done-when check %q exited %d in %.1fs\n", c.Command, c.ExitCode, c.Seconds)
		if out := strings.TrimRight(c.Output, "\n"); out != "" {
			b.WriteString("    " + strings.ReplaceAll(out, "\n", "\n    ") + "\n")
		}
	}
	return b.String()
}

// seconds formats a duration for JUnit: decimal seconds, three places.
func seconds(s float64) string {
	if s < 0 {
		s = 0
	}
	return fmt.Sprintf("%.3f", s)
}

// firstLine is the first line of s, shortened to 200 runes, escaped as
// the terminal output is (human.Escape), for an attribute.
func firstLine(s string) string {
	s = strings.TrimSpace(human.Escape(s))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i]) + " …"
	}
	return cut(s, 200)
}
