// crew inbox (a worker's messages), outbox (what workers sent the
// leader) and pending (what is open for the leader or a worker).

package main

import (
	"bufio"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
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
	id, err := e.task()
	if err != nil {
		if c.String("task") == "" {
			return fmt.Errorf("no task: give --task ID or set CREW_TASK (inbox is a worker's view; the leader reads what workers sent with crew outbox): %w", crew.ErrInvalid)
		}
		return err
	}
	return e.readMailbox(id)
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

func outbox(c *cli.Context) error { return newEnv(c).readMailbox(run.Leader) }

// Flags of inbox and outbox.
var (
	unreadFlag = &cli.BoolFlag{Name: "unread", Usage: "only messages not yet delivered"}
	peekFlag   = &cli.BoolFlag{Name: "peek", Usage: "show the messages without marking them delivered (writes nothing: works on a read-only state root)"}
)

func (e *env) readMailbox(who string) error {
	r, err := e.run()
	if err != nil {
		return err
	}
	since, err := e.since()
	if err != nil {
		return err
	}
	var w store.Waiter
	if e.c.Bool("follow") {
		w = r.Watch()
		defer w.Close()
	}
	// Messages stream out as they are read (any number of them, in
	// little memory), through a buffer flushed after each pass.
	out := bufio.NewWriterSize(e.stdout, 64<<10)
	e.stdout = out
	defer out.Flush()
	first := true
	for {
		n := 0
		err := r.EachInbox(e.c.Context, who, run.InboxOptions{Since: since, Unread: e.c.Bool("unread"), Peek: e.c.Bool("peek")}, func(m *events.Message) error {
			n++
			if m.Seq > since && w != nil {
				since = m.Seq // with --follow, the next pass starts after what this one showed
			}
			if e.json {
				return e.emit(m, "") // the text is not printed: not made either
			}
			return e.emit(m, messageText(m))
		})
		if ferr := out.Flush(); err == nil {
			err = ferr
		}
		if de := (*run.DeliverError)(nil); errors.As(err, &de) {
			err = fmt.Errorf("%w; crew %s --peek shows the messages without marking them", err, e.c.Command.Name)
		}
		if err == nil && n == 0 && since > 0 && first {
			// Nothing after the cursor: it may be past the log's end.
			if st, serr := r.TaskState(); serr == nil {
				e.pastEnd(r, since, st.Seq)
			}
		}
		first = false
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

func pendingCommand() *cli.Command {
	return &cli.Command{
		Name:  "pending",
		Usage: "what is open for you, most urgent first: for the leader, the workers' questions and reports not yet acknowledged; for a worker (--task), its messages not yet acknowledged",
		UsageText: "crew pending\ncrew pending --task t1 --json\n" +
			"crew pending --json | jq -r 'select(.kind==\"question\") | .task'",
		Flags:  []cli.Flag{runFlag, taskFlag, quietAfterFlag},
		Action: pending,
	}
}

// pending prints each open message as inbox does (with --json the same
// message object), a question as the wait of its task.
func pending(c *cli.Context) error {
	e := newEnv(c)
	r, who, err := e.reader()
	if err != nil {
		return err
	}
	p, perr := r.Pending(who)
	if p == nil {
		return perr
	}
	var waitsOn map[string]bool // the questions tasks wait on (the leader's view)
	if who == run.Leader {
		if waitsOn, err = questionsWaitedOn(r); err != nil {
			return err
		}
	}
	for i := range p.Messages {
		m := &p.Messages[i]
		text := messageText(m)
		if m.Kind == events.KindQuestion && who == run.Leader {
			text = questionText(m, waitsOn[m.ID])
		}
		if err := e.emit(m, text); err != nil {
			return err
		}
	}
	lifeless := 0
	if who == run.Leader {
		if lifeless, err = e.pendingLiveness(r); err != nil {
			return err
		}
	}
	if perr == nil && len(p.Messages) == 0 && lifeless == 0 && !e.json {
		fmt.Fprintln(e.stdout, "nothing open")
	}
	return perr
}

// questionsWaitedOn returns the ids of the questions r's tasks wait on.
// An open question that none waits on was answered by default
// (docs/state-machine.md, Asking with a deadline).
func questionsWaitedOn(r *run.Run) (map[string]bool, error) {
	st, err := r.TaskState()
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, t := range st.Tasks {
		if t.Question != "" {
			ids[t.Question] = true
		}
	}
	return ids, nil
}

// questionText is how the leader's pending shows question m: as the wait
// of its task (waited on), with its deadline and default when it has
// them, or as answered by default. An answered-by-default question gets
// run.AnsweredByDefault as its reason, in --json too.
func questionText(m *events.Message, waited bool) string {
	a := state.AskOf(m)
	if !waited && a != nil && a.Default != nil {
		m.Reason = run.AnsweredByDefault
		return fmt.Sprintf("%s was answered by default: %s\n    question %s: %s\n    (crew ack %s dismisses it)",
			m.Task, indent(*a.Default, "    "), m.ID, indent(m.Body, "    "), m.ID)
	}
	text := fmt.Sprintf("%s waits since %s: %s\n    question %s", m.Task, m.SentAt, indent(m.Body, "    "), m.ID)
	if a != nil {
		text += deadlineText(a)
	}
	return text
}

// pendingLiveness lists, for the leader's crew pending, the tasks whose
// worker is quiet, then those whose worker is dead (docs/reading.md,
// Pending), and returns how many it listed.
func (e *env) pendingLiveness(r *run.Run) (int, error) {
	st, live, err := e.tasksAlive(r)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, want := range []string{run.LiveQuiet, run.LiveDead} {
		for _, t := range st.TaskList() {
			l := live[t.ID]
			if l == nil || l.State != want {
				continue
			}
			n++
			rec := map[string]any{"kind": l.State, "task": t, "liveness": l}
			if err := e.emit(rec, fmt.Sprintf("%s is %s", t.ID, livenessText(l))); err != nil {
				return n, err
			}
		}
	}
	return n, nil
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

// questions returns the questions among p's messages, oldest first.
func questions(p *run.Pending) []events.Message {
	var qs []events.Message
	for _, m := range p.Messages {
		if m.Kind == events.KindQuestion {
			qs = append(qs, m)
		}
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Seq < qs[j].Seq })
	return qs
}
