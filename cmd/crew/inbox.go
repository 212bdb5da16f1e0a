// crew inbox (a worker's messages), outbox (what workers sent the
// leader) and pending (what is open for the leader or a worker).

package main

import (
	"bufio"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
)

func inboxCommand() *cli.Command {
	return &cli.Command{
		Name:  "inbox",
		Usage: "a worker's messages not yet acknowledged (inbox, steering, broadcasts); marks them delivered (not with --peek)",
		UsageText: "CREW_TASK=t1 crew inbox\n" +
			"crew inbox --task t1 --unread --json\ncrew inbox --task t1 --follow",
		Flags:  []cli.Flag{runFlag, taskFlag, sinceFlag, followFlag, unreadFlag, peekFlag},
		Action: inbox,
	}
}

func inbox(c *cli.Context) error {
	e := newEnv(c)
	req, err := e.readRequest()
	if err != nil {
		return err
	}
	mb, err := e.app().Inbox(req, e.warn)
	if err != nil {
		return err
	}
	return e.readMailbox(mb)
}

func outboxCommand() *cli.Command {
	return &cli.Command{
		Name:      "outbox",
		Usage:     "the leader's view: what workers sent (questions, reports) not yet acknowledged; marks them delivered (not with --peek)",
		UsageText: "crew outbox\ncrew outbox --since 40 --follow --json",
		Flags:     []cli.Flag{runFlag, sinceFlag, followFlag, unreadFlag, peekFlag},
		Action:    outbox,
	}
}

func outbox(c *cli.Context) error {
	e := newEnv(c)
	req, err := e.readRequest()
	if err != nil {
		return err
	}
	mb, err := e.app().Outbox(req, e.warn)
	if err != nil {
		return err
	}
	e.noteTaken()
	return e.readMailbox(mb)
}

// Flags of inbox and outbox.
var (
	unreadFlag = &cli.BoolFlag{Name: "unread", Usage: "only messages not yet delivered"}
	peekFlag   = &cli.BoolFlag{Name: "peek", Usage: "show the messages without marking them delivered (writes nothing: works on a read-only state root)"}
)

// readRequest is the request of inbox and outbox, from their flags.
func (e *env) readRequest() (app.Read, error) {
	since, err := e.since()
	return app.Read{Since: since, Unread: e.c.Bool("unread"), Peek: e.c.Bool("peek"), Follow: e.c.Bool("follow")}, err
}

// readMailbox prints the messages of mb, pass after pass with --follow.
func (e *env) readMailbox(mb *app.Mailbox) error {
	defer mb.Close()
	// Messages stream out as they are read (any number of them, in
	// little memory), through a buffer flushed after each pass.
	out := bufio.NewWriterSize(e.stdout, 64<<10)
	e.stdout = out
	defer out.Flush()
	for {
		n, err := mb.Read(e.c.Context, func(m *events.Message) error {
			if e.json {
				return e.emit(m, "") // the text is not printed: not made either
			}
			return e.emit(m, messageText(m))
		})
		if ferr := out.Flush(); err == nil {
			err = ferr
		}
		if err != nil || !mb.Follow() {
			if err == nil && n == 0 && !e.json {
				fmt.Fprintln(e.stderr, "crew: no messages")
			}
			return err
		}
		if err := mb.Wait(e.c.Context); err != nil {
			return err
		}
	}
}

func pendingCommand() *cli.Command {
	return &cli.Command{
		Name:  "pending",
		Usage: "what is open for you, most urgent first: for the leader, the workers' questions and reports not yet acknowledged; for a worker (--task), its messages not yet acknowledged",
		UsageText: "crew pending\ncrew pending --task t1 --json\n" +
			"crew pending --json | jq -r 'select(.kind==\"question\") | .task'",
		Flags:  []cli.Flag{runFlag, taskFlag, quietAfterFlag, undeliveredAfterFlag},
		Action: pending,
	}
}

// pending prints each open message as inbox does (with --json the same
// message object), a question as the wait of its task, then, for the
// leader, the tasks whose worker is quiet or dead, and the messages sent
// to workers and not delivered after --undelivered-after.
func pending(c *cli.Context) error {
	e := newEnv(c)
	open, err := e.app().Pending(c.Context, app.Pending{QuietAfter: c.String("quiet-after"), UndeliveredAfter: c.String("undelivered-after")})
	if open == nil {
		return err
	}
	for i := range open.Messages {
		m := &open.Messages[i]
		text := messageText(m)
		if m.Kind == events.KindQuestion && open.Leader {
			text = questionText(m)
		}
		if err := e.emit(m, text); err != nil {
			return err
		}
	}
	for i := range open.Lifeless {
		l := &open.Lifeless[i]
		if err := e.emit(l, fmt.Sprintf("%s is %s", l.Task.ID, livenessText(l.Liveness))); err != nil {
			return err
		}
	}
	for i := range open.Undelivered {
		u := &open.Undelivered[i]
		if err := e.emit(u, undeliveredText(u)); err != nil {
			return err
		}
	}
	if err == nil && len(open.Messages) == 0 && len(open.Lifeless) == 0 && len(open.Undelivered) == 0 && !e.json {
		fmt.Fprintln(e.stdout, "nothing open")
	}
	if err == nil {
		e.noteTaken()
	}
	return err
}

// questionText is how the leader's pending shows question m: as the wait
// of its task, with its deadline and default when it has them, or as
// answered by default (app.Pending gave it that reason).
func questionText(m *events.Message) string {
	a := state.AskOf(m)
	if m.Reason == run.AnsweredByDefault && a != nil && a.Default != nil {
		return fmt.Sprintf("%s was answered by default: %s\n    question %s: %s\n    (crew ack %s dismisses it)",
			m.Task, indent(*a.Default, "    "), m.ID, indent(m.Body, "    "), m.ID)
	}
	text := fmt.Sprintf("%s waits for %s: %s\n    question %s", m.Task, time.Since(m.SentAt.Time).Truncate(time.Second), indent(m.Body, "    "), m.ID)
	if a != nil {
		text += deadlineText(a)
	}
	return text
}

// deadlineText says how long a waiting question has left, and what
// happens then: "\n    deadline in 4m10s, then the default answer: …".
func deadlineText(a *state.Ask) string {
	left := time.Until(a.Deadline.Time).Truncate(time.Second)
	when := fmt.Sprintf("deadline in %s (%s)", left, a.Deadline)
	if left <= 0 {
		when = fmt.Sprintf("deadline passed at %s", a.Deadline)
	}
	if a.Default == nil {
		return "\n    " + when + ", then it times out unanswered"
	}
	return "\n    " + when + ", then the default answer: " + indent(*a.Default, "    ")
}
