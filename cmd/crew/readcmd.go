package main

import (
	"bufio"
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

var (
	sinceFlag  = &cli.Int64Flag{Name: "since", Usage: "only records with seq greater than `SEQ`"}
	followFlag = &cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new records as they arrive (Ctrl-C ends)"}
)

func readCommands() []*cli.Command {
	return []*cli.Command{
		{
			Name:  "inbox",
			Usage: "a worker's messages not yet acknowledged (inbox, steering, broadcasts); marks them delivered",
			UsageText: "CREW_TASK=t1 crew inbox\n" +
				"crew inbox --task t1 --unread --json\ncrew inbox --task t1 --follow",
			Flags: []cli.Flag{runFlag, taskFlag, sinceFlag, followFlag,
				&cli.BoolFlag{Name: "unread", Usage: "only messages not yet delivered"},
			},
			Action: func(c *cli.Context) error {
				e := newEnv(c)
				id, err := e.task()
				if err != nil {
					if c.String("task") == "" {
						return fmt.Errorf("no task: give --task ID or set CREW_TASK (inbox is a worker's view; the leader reads what workers sent with crew outbox): %w", crew.ErrInvalid)
					}
					return err
				}
				return e.readMailbox(id)
			},
		},
		{
			Name:      "outbox",
			Usage:     "the leader's view: what workers sent (questions, reports) not yet acknowledged; marks them delivered",
			UsageText: "crew outbox\ncrew outbox --since 40 --follow --json",
			Flags: []cli.Flag{runFlag, sinceFlag, followFlag,
				&cli.BoolFlag{Name: "unread", Usage: "only messages not yet delivered"},
			},
			Action: func(c *cli.Context) error { return newEnv(c).readMailbox(run.Leader) },
		},
		{
			Name:      "ack",
			Usage:     "acknowledge messages addressed to you (a worker with --task, else the leader)",
			UsageText: "crew ack 0193a1c2-7b1e-7c3d-9e2f-0a1b2c3d4e5f\ncrew inbox --task t1 --json | jq -r .id | xargs -r crew ack --task t1",
			ArgsUsage: "MSG_ID...",
			Flags:     []cli.Flag{runFlag, taskFlag},
			Action: func(c *cli.Context) error {
				e := newEnv(c)
				r, who, err := e.reader()
				if err != nil {
					return err
				}
				if err := r.Acknowledge(c.Context, who, c.Args().Slice(), false, ""); err != nil {
					return err
				}
				return e.emit(map[string]any{"acknowledged": c.Args().Slice()}, "")
			},
		},
		{
			Name:      "reject",
			Usage:     "reject a message addressed to you, with a reason",
			UsageText: "crew reject 0193a1c2-7b1e-7c3d-9e2f-0a1b2c3d4e5f --task t1 --reason \"out of scope\"",
			ArgsUsage: "MSG_ID",
			Flags:     []cli.Flag{runFlag, taskFlag, &cli.StringFlag{Name: "reason", Usage: "why, in `TEXT`"}},
			Action: func(c *cli.Context) error {
				e := newEnv(c)
				if c.Args().Len() != 1 {
					return fmt.Errorf("reject takes one message id: %w", crew.ErrInvalid)
				}
				r, who, err := e.reader()
				if err != nil {
					return err
				}
				if err := r.Acknowledge(c.Context, who, c.Args().Slice(), true, c.String("reason")); err != nil {
					return err
				}
				return e.emit(map[string]any{"rejected": c.Args().First()}, "")
			},
		},
		{
			Name:  "pending",
			Usage: "what is open for you: for the leader, waiting tasks and urgent reports; for a worker (--task), its unacknowledged messages",
			UsageText: "crew pending\ncrew pending --task t1 --json\n" +
				"crew pending --json | jq -r 'select(.kind==\"waiting\") | .task.id'",
			Flags: []cli.Flag{runFlag, taskFlag},
			Action: func(c *cli.Context) error {
				e := newEnv(c)
				r, who, err := e.reader()
				if err != nil {
					return err
				}
				p, perr := r.Pending(who)
				if p == nil {
					return perr
				}
				for _, w := range p.Waiting {
					rec := map[string]any{"kind": "waiting", "task": w.Task, "question": w.Question}
					human := fmt.Sprintf("%s waits since %s: %s\n    question %s", w.Task.ID, w.Question.SentAt, indent(w.Question.Body, "    "), w.Question.ID)
					if err := e.emit(rec, human); err != nil {
						return err
					}
				}
				for i := range p.Messages {
					m := &p.Messages[i]
					if err := e.emit(map[string]any{"kind": "message", "message": m}, messageText(m)); err != nil {
						return err
					}
				}
				if perr == nil && len(p.Waiting) == 0 && len(p.Messages) == 0 && !e.json {
					fmt.Fprintln(e.stdout, "nothing open")
				}
				return perr
			},
		},
		{
			Name:      "events",
			Usage:     "print the run's event log (the source of truth)",
			UsageText: "crew events\ncrew events --since 120 --type task.waiting --json\ncrew events --follow",
			Flags: []cli.Flag{runFlag, sinceFlag, followFlag,
				&cli.StringSliceFlag{Name: "type", Usage: "only events of `TYPE` (repeatable), e.g. task.waiting"},
			},
			Action: eventsAction,
		},
	}
}

func (e *env) readMailbox(who string) error {
	r, err := e.run()
	if err != nil {
		return err
	}
	since := e.c.Int64("since")
	if since < 0 {
		return fmt.Errorf("--since must be 0 or more: %w", crew.ErrInvalid)
	}
	var w run.Waiter
	if e.c.Bool("follow") {
		w = r.Watch()
		defer w.Close()
	}
	// Messages stream out as they are read (any number of them, in
	// little memory), through a buffer flushed after each pass.
	out := bufio.NewWriterSize(e.stdout, 64<<10)
	e.stdout = out
	defer out.Flush()
	for {
		n := 0
		err := r.EachInbox(e.c.Context, who, run.InboxOptions{Since: since, Unread: e.c.Bool("unread")}, func(m *events.Message) error {
			n++
			if m.Seq > since && w != nil {
				since = m.Seq // with --follow, the next pass starts after what this one showed
			}
			return e.emit(m, messageText(m))
		})
		if ferr := out.Flush(); err == nil {
			err = ferr
		}
		if err != nil || w == nil {
			if err == nil && n == 0 && !e.json {
				fmt.Fprintln(e.stderr, "crew: no messages")
			}
			return err
		}
		if err := w.Wait(e.c.Context); err != nil {
			return err
		}
	}
}

func eventsAction(c *cli.Context) error {
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
