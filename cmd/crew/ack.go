// crew ack and reject: acknowledge (or refuse) messages addressed to you.

package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
)

func ackCommand() *cli.Command {
	return &cli.Command{
		Name:      "ack",
		Usage:     "acknowledge messages addressed to you (a worker with --task, else the leader)",
		UsageText: "crew ack 0193a1c2-7b1e-7c3d-9e2f-0a1b2c3d4e5f\ncrew inbox --task t1 --json | jq -r .id | xargs -r crew ack --task t1",
		ArgsUsage: "MSG_ID...",
		Flags:     []cli.Flag{runFlag, taskFlag},
		Action:    ack,
	}
}

func ack(c *cli.Context) error {
	e := newEnv(c)
	done, err := e.app().Ack(c.Context, app.Ack{IDs: c.Args().Slice()})
	if err != nil {
		return err
	}
	return e.emit(done, "")
}

func rejectCommand() *cli.Command {
	return &cli.Command{
		Name:      "reject",
		Usage:     "reject a message addressed to you, with a reason",
		UsageText: "crew reject 0193a1c2-7b1e-7c3d-9e2f-0a1b2c3d4e5f --task t1 --reason \"out of scope\"",
		ArgsUsage: "MSG_ID",
		Flags:     []cli.Flag{runFlag, taskFlag, &cli.StringFlag{Name: "reason", Usage: "why, in `TEXT`"}},
		Action:    reject,
	}
}

func reject(c *cli.Context) error {
	if c.Args().Len() != 1 {
		return fmt.Errorf("reject takes one message id: %w", crew.ErrInvalid)
	}
	e := newEnv(c)
	done, err := e.app().Reject(c.Context, app.Reject{ID: c.Args().First(), Reason: c.String("reason")})
	if err != nil {
		return err
	}
	return e.emit(done, "")
}
