// crew ask (a worker's question to the leader, with --wait its answer)
// and crew await (the answer to a question asked before).

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
)

func askCommand() *cli.Command {
	return &cli.Command{
		Name:  "ask",
		Usage: "ask the leader a question (worker): prints the question id, or with --wait blocks and prints the answer",
		UsageText: "CREW_RUN=r1 CREW_TASK=t1 crew ask \"Which database?\" --wait\n" +
			"crew ask --task t1 - --wait --timeout 10m < question.txt",
		ArgsUsage: "[BODY|-]",
		Flags: []cli.Flag{runFlag, taskFlag, asFlag, priorityFlag,
			&cli.BoolFlag{Name: "wait", Usage: "block until the leader responds, then print the response"},
			&cli.StringFlag{Name: "timeout", Usage: "the question's deadline, a `DURATION` from now, stored in it: unanswered by then, the task goes back to running and crew ask --wait (or crew await) exits 5, or with --default prints the default"},
			&cli.StringFlag{Name: "default", Usage: "with --timeout: the answer `TEXT` the worker goes on with when the deadline passes unanswered (task.ask_timed_out records it)"},
		},
		Action: ask,
	}
}

func ask(c *cli.Context) error {
	e := newEnv(c)
	deadline, err := askDeadline(c)
	if err != nil {
		return err
	}
	r, msg, err := e.workerMessage()
	if err != nil {
		return err
	}
	msg.Ask = deadline
	q, m, err := r.Ask(c.Context, msg, c.Bool("wait"))
	if err != nil {
		if q != nil && c.Bool("wait") {
			fmt.Fprintf(e.stderr, "crew: question %s\n", q.ID)
		}
		return err
	}
	if !c.Bool("wait") {
		return e.emit(q, q.ID)
	}
	return e.answered(r, msg.Task, m)
}

// askDeadline reads --timeout and --default: the deadline (and default
// answer) stored in the question, or nil without --timeout.
func askDeadline(c *cli.Context) (*state.Ask, error) {
	if c.String("timeout") == "" {
		if c.IsSet("default") {
			return nil, fmt.Errorf("--default goes with --timeout: the default answer is for when the deadline passes: %w", crew.ErrInvalid)
		}
		return nil, nil
	}
	d, err := duration(c.String("timeout"))
	if err != nil {
		return nil, err
	}
	a := &state.Ask{Deadline: events.Time{Time: time.Now().Add(d).UTC().Truncate(time.Millisecond)}}
	if c.IsSet("default") {
		def := c.String("default")
		a.Default = &def
	}
	return a, nil
}

func awaitCommand() *cli.Command {
	return &cli.Command{
		Name:      "await",
		Usage:     "wait for the response to a question (a worker that restarted while waiting)",
		UsageText: "crew await 0193a1c2-7b1e-7c3d-9e2f-0a1b2c3d4e5f --timeout 10m",
		ArgsUsage: "QUESTION_ID",
		Flags: []cli.Flag{runFlag,
			&cli.StringFlag{Name: "timeout", Usage: "give up after `DURATION` (exit 5)"},
		},
		Action: await,
	}
}

func await(c *cli.Context) error {
	e := newEnv(c)
	if c.Args().Len() != 1 {
		return fmt.Errorf("await takes one question id: %w", crew.ErrInvalid)
	}
	r, err := e.run()
	if err != nil {
		return err
	}
	ctx, cancel, err := withTimeout(c)
	if err != nil {
		return err
	}
	defer cancel()
	m, err := r.Await(ctx, c.Args().First())
	if err != nil {
		return err
	}
	return e.answered(r, m.Task, m)
}

// answered prints the response m and acknowledges it for task: the
// worker has the answer, so it does not linger in the inbox. Printing
// comes first: a crash in between only shows it again.
func (e *env) answered(r *run.Run, task string, m *events.Message) error {
	if err := e.emitAnswer(m); err != nil {
		return err
	}
	if m.ID == "" { // answered by default: no message to acknowledge
		e.warn(fmt.Errorf("question %s: no answer before its deadline; going on with the default answer", m.ReplyTo))
		return nil
	}
	return r.Acknowledge(context.WithoutCancel(e.c.Context), task, []string{m.ID}, false, "")
}

// emitAnswer prints a response: its body (exactly, with --json the
// message).
func (e *env) emitAnswer(m *events.Message) error {
	if e.json {
		return e.emit(m, "")
	}
	body := human.Escape(m.Body)
	if len(body) == 0 || body[len(body)-1] != '\n' {
		body += "\n"
	}
	_, err := fmt.Fprint(e.stdout, body)
	return err
}
