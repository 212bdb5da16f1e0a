// crew events: print a run's event log.

package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/state"
)

func eventsCommand() *cli.Command {
	return &cli.Command{
		Name:      "events",
		Usage:     "print the run's event log (the source of truth)",
		UsageText: "crew events\ncrew events --since 120 --type task.waiting --json\ncrew events --follow",
		Flags: []cli.Flag{runFlag, sinceFlag, followFlag,
			&cli.StringSliceFlag{Name: "type", Usage: "only events of `TYPE` (repeatable), e.g. task.waiting"},
		},
		Action: printEvents,
	}
}

func printEvents(c *cli.Context) error {
	e := newEnv(c)
	since, err := e.since()
	if err != nil {
		return err
	}
	req := app.Events{Since: since, Types: c.StringSlice("type"), Follow: c.Bool("follow")}
	err = e.app().Events(c.Context, req, e.warn, func(ev *events.Event) error {
		return e.emit(ev, eventText(ev))
	})
	if err == nil {
		e.noteTaken()
	}
	return err
}

// eventText is the human form of an event: one line, a message's body
// shortened.
func eventText(ev *events.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%6d  %s  %-22s", ev.Seq, ev.At, ev.Type)
	if ev.Task != "" {
		fmt.Fprintf(&b, "  %s", ev.Task)
	}
	if ev.Actor != "" {
		fmt.Fprintf(&b, "  by %s", human.Escape(ev.Actor))
	}
	switch {
	case ev.From != "":
		fmt.Fprintf(&b, "  %s -> %s", ev.From, ev.To)
	case ev.To != "":
		fmt.Fprintf(&b, "  -> %s", ev.To)
	}
	if len(ev.MessageIDs) > 0 {
		fmt.Fprintf(&b, "  %s", human.Count(len(ev.MessageIDs), "message"))
	}
	b.WriteString(detailText(ev))
	if ev.Reason != "" {
		fmt.Fprintf(&b, "  reason %q", shorten(ev.Reason, 60))
	}
	if m := ev.Message; m != nil {
		// Last: an event that fails a task or times a question out
		// carries crew's message to the leader after its reason.
		fmt.Fprintf(&b, "  %s %q", m.Kind, shorten(m.Body, 60))
	}
	return b.String()
}

// detailText is what eventText adds for worker.started ("  attempt 1
// pid 42 on host: cmd"), worker.exited ("  attempt 1 pid 42 exited with
// status 2"), worker.stop_asked ("  attempt 1") and a task.ask_timed_out that answered by default
// ("  answered by default \"…\""), and "" for other events.
func detailText(ev *events.Event) string {
	switch ev.Type {
	case events.TaskAskTimedOut:
		if def := state.DefaultOf(ev); def != nil {
			return fmt.Sprintf("  answered by default %q", shorten(*def, 60))
		}
	case events.WorkerStarted:
		var w state.Worker
		if json.Unmarshal(ev.Data, &w) == nil {
			return fmt.Sprintf("  attempt %d pid %d on %s: %s", w.Attempt, w.PID, human.Escape(w.Host), shorten(human.Escape(strings.Join(w.Command, " ")), 60))
		}
	case events.WorkerExited:
		var x state.WorkerExit
		if json.Unmarshal(ev.Data, &x) == nil {
			return fmt.Sprintf("  attempt %d pid %d %s", x.Attempt, x.PID, x.Describe())
		}
	case events.WorkerStopAsked:
		var a struct{ Attempt int }
		if json.Unmarshal(ev.Data, &a) == nil {
			return fmt.Sprintf("  attempt %d", a.Attempt)
		}
	}
	return ""
}
