// Shared by the commands: how records are printed (emit: JSON lines
// with --json, else text, made safe for a terminal by human.Escape).

package main

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/run"
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
	if m.Priority != "" && m.Priority != events.DefaultPriority {
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

// printTasks prints the table of tasks of run show and task list, with
// what each task that has not ended is doing.
func printTasks(e *env, recs []app.TaskRecord) {
	fmt.Fprintf(e.stdout, "%-20s %-10s %-16s %-10s %s\n", "TASK", "STATUS", "AGENT", "LIVENESS", "TITLE")
	for _, t := range recs {
		l := "-"
		if t.Liveness != nil {
			l = t.Liveness.State
		}
		fmt.Fprintf(e.stdout, "%-20s %-10s %-16s %-10s %s\n", t.ID, t.Status, t.Agent, l, human.Line(t.Title))
	}
}

// livenessText says what a task is doing, for people: "working",
// "quiet for 6m (since …)", "waiting for 2m on question ID", "dead: pid 42 is gone".
func livenessText(l *run.Liveness) string {
	since := time.Since(l.Since.Time).Truncate(time.Second)
	switch l.State {
	case run.LiveQuiet:
		return fmt.Sprintf("quiet for %s (no sign of life since %s)", since, l.Since)
	case run.LiveWaiting:
		return fmt.Sprintf("waiting for %s on question %s", since, l.Question)
	case run.LiveDead:
		return fmt.Sprintf("dead: its worker, pid %d, is gone", l.PID)
	}
	return fmt.Sprintf("working (last sign of life %s ago)", since)
}

// quietAfterFlag is the --quiet-after of the commands that say what tasks
// are doing.
var quietAfterFlag = &cli.StringFlag{Name: "quiet-after", Usage: "a running task with no sign of life for `DURATION` is quiet", Value: "5m"}

// warn prints err on stderr, as crew prints an error, for a command that
// goes on.
func (e *env) warn(err error) {
	fmt.Fprintf(e.stderr, "crew: %s\n", human.Escape(message(err)))
}

// undeliveredAfterFlag is the --undelivered-after of the commands that
// list messages sent to workers and not delivered.
var undeliveredAfterFlag = &cli.StringFlag{Name: "undelivered-after", Usage: "list a message sent to a worker and not delivered for `DURATION`, with the likely reason", Value: "2m"}

// undeliveredText says that a message has not reached its worker, and
// the likely reason: "t1 has not received steer ID, sent 3m ago: …\n
// likely: …".
func undeliveredText(u *app.Undelivered) string {
	m := &u.Message
	return fmt.Sprintf("%s has not received %s %s, sent %s ago: %s\n    likely: %s", m.Task, m.Kind, m.ID,
		time.Since(m.SentAt.Time).Truncate(time.Second), indent(m.Body, "    "), u.Reason)
}
