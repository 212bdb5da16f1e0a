// Shared by the commands: how records are printed (emit: JSON lines
// with --json, else text, made safe for a terminal by human.Escape).

package main

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/state"
)

// emit prints one record: as a JSON line with --json, else as human text.
func (e *env) emit(v any, text string) error {
	if e.json {
		line, err := jsonLine(v)
		if err != nil {
			return err
		}
		_, err = e.stdout.Write(line)
		return err
	}
	if text == "" {
		return nil
	}
	_, err := fmt.Fprintln(e.stdout, text)
	return err
}

func jsonLine(v any) ([]byte, error) { return events.Marshal(v) }

// indent escapes s and indents every line after the first by pad.
func indent(s, pad string) string {
	return strings.ReplaceAll(human.Escape(s), "\n", "\n"+pad)
}

// messageText is the human form of a message: a header line and its body.
func messageText(m *events.Message) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s  #%d  %s  %s -> %s", m.ID, m.Seq, m.Kind, human.Escape(m.From), human.Escape(m.To))
	if m.Priority != "" && m.Priority != "normal" {
		fmt.Fprintf(&b, "  [%s]", m.Priority)
	}
	fmt.Fprintf(&b, "  %s  %s\n    %s", m.Status, m.SentAt.Format(time.DateTime), indent(m.Body, "    "))
	return b.String()
}

// shorten cuts s to at most n runes, marking the cut with "…".
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// printTasks prints the table of tasks of run show and task list.
func printTasks(e *env, ts []*state.Task) {
	fmt.Fprintf(e.stdout, "%-20s %-10s %-16s %s\n", "TASK", "STATUS", "AGENT", "TITLE")
	for _, t := range ts {
		fmt.Fprintf(e.stdout, "%-20s %-10s %-16s %s\n", t.ID, t.Status, t.Agent, human.Line(t.Title))
	}
}

// warn prints err on stderr, as crew prints an error, for a command that
// goes on.
func (e *env) warn(err error) {
	fmt.Fprintf(e.stderr, "crew: %s\n", human.Escape(message(err)))
}
