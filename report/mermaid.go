package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/task"
)

// MaxDiagram bounds the text of a mermaid diagram, in bytes. Renderers
// refuse larger diagrams (mermaid's maxTextSize is 50,000 characters by
// default, and GitHub keeps the default), so a long conversation is cut:
// its last arrows are replaced by a note saying how many were left out.
const MaxDiagram = 45000

// ArrowRunes is how much of a body an arrow shows, in runes.
const ArrowRunes = 60

// Mermaid writes the run's conversation as a mermaid sequenceDiagram: the
// leader and each task as participants, one arrow per message (its kind
// and its body, shortened and escaped), and a note where a task ends.
//
// Participants get synthetic ids (L for the leader, T1, T2 … for tasks)
// and show the real names as aliases: a task id such as "end", "opt" or
// "loop-1" is a keyword to mermaid's lexer and would break the diagram.
// Text is escaped with mermaid's entity codes (see mermaidText).
func (rep *Report) Mermaid(w io.Writer) error {
	bw := bufio.NewWriter(w)
	rep.mermaid(bw)
	return bw.Flush()
}

func (rep *Report) mermaid(w io.Writer) {
	ids := map[string]string{}
	var b strings.Builder
	b.WriteString("sequenceDiagram\n")
	fmt.Fprintf(&b, "    participant L as %s\n", mermaidText(rep.Manifest.Leader+" (leader)", 0))
	for i, t := range rep.Tasks {
		id := fmt.Sprintf("T%d", i+1)
		ids[t.ID] = id
		alias := t.ID
		if t.Agent != "" && t.Agent != t.ID {
			alias += " (" + t.Agent + ")"
		}
		fmt.Fprintf(&b, "    participant %s as %s\n", id, mermaidText(alias, 0))
	}
	var lines []string
	ends := rep.ends
	flushEnds := func(seq int64) {
		for len(ends) > 0 && ends[0].Seq <= seq {
			e := ends[0]
			ends = ends[1:]
			if id, ok := ids[e.Task]; ok {
				text := string(e.Status)
				if e.Reason != "" {
					text += ": " + e.Reason
				}
				lines = append(lines, fmt.Sprintf("    Note over %s: %s\n", id, mermaidText(text, ArrowRunes)))
			}
		}
	}
	for _, m := range rep.Messages {
		flushEnds(m.Seq - 1)
		task, ok := ids[m.Task]
		if m.Task == events.Broadcast {
			task, ok = ids[m.To]
		}
		if k, _ := events.KindOf(m.Kind); !ok || k.Sender == events.SenderCrew {
			continue // (crew's notices to the leader repeat a task's end, or a question's rejection, drawn already)
		}
		from, to, arrow := "L", task, "->>"
		if m.Direction == events.Outbox {
			from, to = task, "L"
		}
		if m.Kind == events.KindResponse {
			arrow = "-->>" // a reply
		}
		text := m.Kind + ": " + m.Body
		if m.Status == events.StatusRejected {
			text = "[rejected] " + text
		}
		lines = append(lines, fmt.Sprintf("    %s%s%s: %s\n", from, arrow, to, mermaidText(text, ArrowRunes)))
	}
	flushEnds(rep.Seq)
	size := b.Len()
	for i, l := range lines {
		if size+len(l) > MaxDiagram-200 {
			fmt.Fprintf(&b, "    Note over L: %d more not shown (crew run report --format json has them all)\n", len(lines)-i)
			break
		}
		b.WriteString(l)
		size += len(l)
	}
	io.WriteString(w, b.String())
}

// mermaidText makes s safe as the text of a mermaid arrow, note or
// participant alias, shortened to n runes (n > 0) after whitespace is
// collapsed to single spaces (a diagram line ends at a newline).
//
// Mermaid's sequence lexer ends a text at ';' or '#' and starts comments
// and directives with '%%'; before lexing it turns entity codes (#59;,
// #quot;) into placeholders and back into characters when it draws. So
// every character that could end, comment out or restyle a line, or be
// taken as HTML, is written as an entity code: # ; % : " < > &. The rest
// is left as it is, but for control characters, line separators and bidi
// controls, which are escaped as on the terminal (oneLine: \u202e).
func mermaidText(s string, n int) string {
	s = cut(oneLine(s), n)
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '#':
			b.WriteString("#35;")
		case ';':
			b.WriteString("#59;")
		case '%':
			b.WriteString("#37;")
		case ':':
			b.WriteString("#58;")
		case '"':
			b.WriteString("#quot;")
		case '<':
			b.WriteString("#lt;")
		case '>':
			b.WriteString("#gt;")
		case '&':
			b.WriteString("#amp;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// statusMark is a task status as a short symbol for tables.
func statusMark(s task.State) string {
	switch s {
	case task.Completed:
		return "✅"
	case task.Failed:
		return "❌"
	case task.Cancelled:
		return "⏹️"
	case task.Waiting:
		return "❓"
	case task.Running:
		return "⏳"
	default:
		return "💤"
	}
}
