package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/task"
)

// CellRunes is how much text a markdown table cell shows, in runes.
const CellRunes = 120

// Markdown writes the run as GitHub-flavoured markdown, ready to append
// to $GITHUB_STEP_SUMMARY: a heading with the run's summary, a table of
// tasks (id, agent, status, duration, time spent waiting for answers,
// questions asked, result or reason), the message counts by kind and
// status, and the conversation as a mermaid diagram. Text from messages
// and reasons is escaped (mdText), so a body cannot add markup, links,
// images or HTML to the page, and its control and bidi characters are
// shown as the terminal shows them (\u202e).
func (rep *Report) Markdown(w io.Writer) error {
	bw := bufio.NewWriter(w)
	m := rep.Manifest
	title := ""
	if m.Title != "" {
		title = " — " + mdText(m.Title, CellRunes)
	}
	fmt.Fprintf(bw, "### crew run `%s`%s\n\n", m.ID, title)
	if len(rep.Damage) > 0 {
		fmt.Fprintf(bw, "> [!WARNING]\n> The run's log is damaged in %s; this report shows what could be read. Run `crew repair %s`.\n\n", human.Count(len(rep.Damage), "place"), m.ID)
	}
	fmt.Fprintf(bw, "**%s** · leader `%s` · %s · %s\n\n", rep.Summary, m.Leader, duration(rep.Timings.Seconds), human.Count(int(rep.Seq), "event"))
	if len(rep.Tasks) > 0 {
		bw.WriteString("| task | agent | status | duration | waited | questions | result or reason |\n")
		bw.WriteString("| --- | --- | --- | ---: | ---: | ---: | --- |\n")
		for _, t := range rep.Tasks {
			dur := "—"
			if t.StartedAt != nil {
				dur = duration(t.Seconds)
			}
			waited := "—"
			if t.WaitingSeconds > 0 {
				waited = duration(t.WaitingSeconds)
			}
			fmt.Fprintf(bw, "| `%s` | `%s` | %s %s | %s | %s | %d | %s |\n",
				t.ID, t.Agent, statusMark(t.Status), t.Status, dur, waited, t.Questions, rep.outcome(t))
		}
		bw.WriteString("\n")
	}
	if len(rep.Counts) > 0 {
		bw.WriteString("| messages | sent | pending | delivered | acknowledged | rejected |\n")
		bw.WriteString("| --- | ---: | ---: | ---: | ---: | ---: |\n")
		for _, k := range rep.Counts {
			fmt.Fprintf(bw, "| %s | %d | %d | %d | %d | %d |\n", mdText(k.Kind, 40), k.Messages, k.Pending, k.Delivered, k.Acknowledged, k.Rejected)
		}
		bw.WriteString("\n")
	}
	bw.WriteString("```mermaid\n")
	rep.mermaid(bw)
	bw.WriteString("```\n")
	return bw.Flush()
}

// outcome is a task's "result or reason" cell.
func (rep *Report) outcome(t *Task) string {
	var parts []string
	switch t.Status {
	case task.Failed, task.Cancelled:
		if t.Reason != "" {
			parts = append(parts, mdText(t.Reason, CellRunes))
		}
	case task.Waiting:
		if q := rep.question(t); q != nil {
			parts = append(parts, "asks: "+mdText(q.Body, CellRunes))
		}
	}
	if t.AnsweredByDefault > 0 {
		parts = append(parts, human.Count(t.AnsweredByDefault, "question")+" answered by default")
	}
	if t.Status == task.Completed && t.Check != nil {
		parts = append(parts, fmt.Sprintf("check `%s` passed", strings.ReplaceAll(mdCode(t.Check.Command, 60), "`", "'")))
	}
	if t.Result != "" && t.Status != task.Waiting {
		parts = append(parts, mdText(t.Result, CellRunes))
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, " · ")
}

// duration formats seconds for people: 850ms, 4.2s, 1m3s, 2h5m0s.
func duration(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// mdText makes s safe as inline text in a markdown table cell: whitespace
// collapsed (a table row is one line), cut to n runes, markdown
// punctuation backslash-escaped and HTML's < > & written as entities, so
// nothing in s becomes markup, a link, an image or a tag.
func mdText(s string, n int) string {
	s = cut(oneLine(s), n)
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '\\', '`', '*', '_', '[', ']', '~', '|', '!', '#', '$':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdCode makes s safe inside a code span in a table cell: one line, cut to
// n runes, with | escaped (GFM splits cells on | even in code spans).
func mdCode(s string, n int) string {
	return strings.ReplaceAll(cut(oneLine(s), n), "|", `\|`)
}

// oneLine escapes s as the terminal output does (human.Escape: control
// characters, line separators and bidi controls become \x1b, \u202e)
// and collapses runs of whitespace to single spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(human.Escape(s)), " ")
}
