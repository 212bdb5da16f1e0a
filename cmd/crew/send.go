// crew respond, steer, follow-up, nudge (leader to one worker), broadcast
// (leader to every worker) and report (worker to leader): messages sent
// without waiting.

package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
)

// leaderSendCommand is a leader -> worker command: respond, steer,
// follow-up or nudge.
func leaderSendCommand(name, usage, example string) *cli.Command {
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		UsageText: example,
		ArgsUsage: "TASK [BODY|-]",
		Flags:     []cli.Flag{runFlag, asFlag, priorityFlag},
		Action:    leaderSend,
	}
}

func respondCommand() *cli.Command {
	return leaderSendCommand("respond", "answer a waiting task's open question and unblock its worker (leader)",
		"crew respond t1 \"Use Postgres.\"\ncrew respond t1 - < answer.md")
}

func steerCommand() *cli.Command {
	return leaderSendCommand("steer", "redirect a worker at its next safe point (leader)",
		"crew steer t2 \"Stop refactoring; fix the failing test first.\"")
}

func followUpCommand() *cli.Command {
	return leaderSendCommand("follow-up", "queue work for after the worker's current step (leader)",
		"crew follow-up t2 \"When done, also update the changelog.\"")
}

func nudgeCommand() *cli.Command {
	return leaderSendCommand("nudge", "ask a quiet worker to report its status (leader)",
		"crew nudge t3\ncrew nudge t3 \"Are you stuck?\" --priority high")
}

// leaderSend sends the message of the command's kind to the task named
// by the first argument.
func leaderSend(c *cli.Context) error {
	e := newEnv(c)
	name := c.Command.Name
	if c.Args().Len() < 1 {
		return fmt.Errorf("%s needs a task id: crew %s TASK BODY: %w", name, name, crew.ErrInvalid)
	}
	id := c.Args().First()
	if err := crew.ValidateID("task", id); err != nil {
		return err
	}
	def := ""
	if name == "nudge" {
		def = run.DefaultNudge
	}
	body, err := e.body(1, def)
	if err != nil {
		return err
	}
	a, req := e.app(), app.ToWorker{Task: id, Body: body, Priority: c.String("priority")}
	send := map[string]func(context.Context, app.ToWorker) (*events.Message, error){
		"respond": a.Respond, "steer": a.Steer, "follow-up": a.FollowUp,
		"nudge": func(ctx context.Context, req app.ToWorker) (*events.Message, error) {
			return a.Nudge(ctx, app.Nudge(req))
		},
	}[name]
	return e.sent(send(c.Context, req))
}

func broadcastCommand() *cli.Command {
	return &cli.Command{
		Name:      "broadcast",
		Usage:     "send a message to every task that has not ended (leader)",
		UsageText: "crew broadcast \"Freeze: no pushes to main until 15:00.\"",
		ArgsUsage: "[BODY|-]",
		Flags:     []cli.Flag{runFlag, asFlag, priorityFlag},
		Action:    sendBroadcast,
	}
}

func sendBroadcast(c *cli.Context) error {
	e := newEnv(c)
	body, err := e.body(0, "")
	if err != nil {
		return err
	}
	return e.sent(e.app().Broadcast(c.Context, app.Broadcast{Body: body, Priority: c.String("priority")}))
}

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "tell the leader something without waiting (worker)",
		UsageText: "crew report \"vet is clean\"\ncrew report --priority urgent \"the build server is down\"",
		ArgsUsage: "[BODY|-]",
		Flags:     []cli.Flag{runFlag, taskFlag, asFlag, priorityFlag},
		Action:    sendReport,
	}
}

func sendReport(c *cli.Context) error {
	e := newEnv(c)
	body, err := e.body(0, "")
	if err != nil {
		return err
	}
	return e.sent(e.app().Report(c.Context, app.Report{Body: body, Priority: c.String("priority")}))
}

// sent prints the id of a message sent (the message with --json).
func (e *env) sent(m *events.Message, err error) error {
	if err != nil {
		return err
	}
	return e.emit(m, m.ID)
}
