// crew respond, steer, follow-up, nudge (leader to one worker), broadcast
// (leader to every worker) and report (worker to leader): messages sent
// without waiting.

package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
)

// leaderKinds is the kind of message each leader -> worker command sends.
var leaderKinds = map[string]string{
	"respond":   events.KindResponse,
	"steer":     events.KindSteer,
	"follow-up": events.KindFollowUp,
	"nudge":     events.KindNudge,
}

// leaderSendCommand is a leader -> worker command: name is one of
// leaderKinds.
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

// leaderSend sends the message of the command's kind (leaderKinds) to
// the task named by the first argument.
func leaderSend(c *cli.Context) error {
	e := newEnv(c)
	name := c.Command.Name
	kind := leaderKinds[name]
	if c.Args().Len() < 1 {
		return fmt.Errorf("%s needs a task id: crew %s TASK BODY: %w", name, name, crew.ErrInvalid)
	}
	id := c.Args().First()
	if err := crew.ValidateID("task", id); err != nil {
		return err
	}
	def := ""
	if kind == events.KindNudge {
		def = run.DefaultNudge
	}
	return e.sendAsLeader(kind, id, 1, def)
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
	return newEnv(c).sendAsLeader(events.KindMessage, events.Broadcast, 0, "")
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
	r, msg, err := e.workerMessage()
	if err != nil {
		return err
	}
	msg.Kind = events.KindReport
	return e.send(r, msg)
}

// sendAsLeader sends a message of kind from the leader (leaderRun) to
// task (events.Broadcast: every task that has not ended), its body from
// argument i (def when missing).
func (e *env) sendAsLeader(kind, task string, i int, def string) error {
	body, err := e.body(i, def)
	if err != nil {
		return err
	}
	r, from, err := e.leaderRun()
	if err != nil {
		return err
	}
	return e.send(r, run.SendOptions{Kind: kind, Task: task, From: from, Body: body, Priority: e.c.String("priority")})
}

// send sends msg and prints its id.
func (e *env) send(r *run.Run, msg run.SendOptions) error {
	m, err := r.Send(e.c.Context, msg)
	if err != nil {
		return err
	}
	return e.emit(m, m.ID)
}
