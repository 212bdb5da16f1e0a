// crew events: print a run's event log.

package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
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
	r, err := e.run()
	if err != nil {
		return err
	}
	types := c.StringSlice("type")
	for _, t := range types {
		if !slices.Contains(events.Types, t) {
			return fmt.Errorf("unknown event type %q; types are %s: %w", t, strings.Join(events.Types, ", "), crew.ErrInvalid)
		}
	}
	since := c.Int64("since")
	if since < 0 {
		return fmt.Errorf("--since must be 0 or more: %w", crew.ErrInvalid)
	}
	cur, err := r.Events(since)
	if err != nil {
		return err
	}
	defer cur.Close()
	var w run.Waiter
	if c.Bool("follow") {
		w = r.Watch()
		defer w.Close()
	}
	var damage []error
	for {
		ev, err := cur.Next()
		if err == io.EOF {
			if w == nil {
				break
			}
			if err := w.Wait(c.Context); err != nil {
				return err
			}
			continue
		}
		var de *events.DamageError
		if errors.As(err, &de) {
			fmt.Fprintf(e.stderr, "crew: %s\n", escape(de.Error()))
			damage = append(damage, de)
			if ev.Seq == 0 {
				continue
			}
		} else if err != nil {
			return err
		}
		if len(types) > 0 && !slices.Contains(types, ev.Type) {
			continue
		}
		if err := e.emit(&ev, eventText(&ev)); err != nil {
			return err
		}
	}
	if len(damage) > 0 {
		return fmt.Errorf("%d damaged places in %s; what could be read was printed; run crew repair: %w", len(damage), r.EventsPath(), crew.ErrDamaged)
	}
	return nil
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
		fmt.Fprintf(&b, "  by %s", escape(ev.Actor))
	}
	switch {
	case ev.From != "":
		fmt.Fprintf(&b, "  %s -> %s", ev.From, ev.To)
	case ev.To != "":
		fmt.Fprintf(&b, "  -> %s", ev.To)
	}
	if m := ev.Message; m != nil {
		fmt.Fprintf(&b, "  %s %q", m.Kind, shorten(m.Body, 60))
	}
	if len(ev.MessageIDs) > 0 {
		fmt.Fprintf(&b, "  %d message(s)", len(ev.MessageIDs))
	}
	if ev.Reason != "" {
		fmt.Fprintf(&b, "  reason %q", shorten(ev.Reason, 60))
	}
	return b.String()
}
