// crew ask (a worker's question to the leader, with --wait its answer)
// and crew await (the answer to a question asked before).

package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
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
	req := app.Ask{Priority: c.String("priority"), Wait: c.Bool("wait"), Timeout: c.String("timeout")}
	if c.IsSet("default") {
		def := c.String("default")
		req.Default = &def
	}
	body, err := e.body(0, "")
	if err != nil {
		return err
	}
	req.Question = body
	m, err := e.app().Ask(c.Context, req, e.emitAnswer)
	if err != nil {
		if m != nil && req.Wait {
			fmt.Fprintf(e.stderr, "crew: question %s\n", m.ID)
		}
		return err
	}
	if !req.Wait {
		return e.emit(m, m.ID)
	}
	e.answeredByDefault(m)
	return nil
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
	m, err := e.app().Await(c.Context, app.Await{QuestionID: c.Args().First(), Timeout: c.String("timeout")}, e.emitAnswer)
	if err != nil {
		return err
	}
	e.answeredByDefault(m)
	return nil
}

// answeredByDefault says on stderr when response m is a question's
// default answer, which crew gave at the deadline (no message of the
// leader's).
func (e *env) answeredByDefault(m *events.Message) {
	if m.ID == "" {
		e.warn(fmt.Errorf("question %s: no answer before its deadline; going on with the default answer", m.ReplyTo))
	}
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
