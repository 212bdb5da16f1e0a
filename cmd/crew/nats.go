// crew nats auth: the NATS server's authorization block and one
// credentials file per agent (docs/nats.md, Authorization). The command
// is in both builds; the full one runs it (crew_full.go), so that the
// lite build links no NATS library.

package main

import (
	"github.com/urfave/cli/v2"
)

func natsCommand() *cli.Command {
	return &cli.Command{
		Name:      "nats",
		Usage:     "set up a NATS server for crew: per-agent credentials that the server enforces",
		UsageText: "crew nats auth --out ./nats --leader lead t1 t2",
		Subcommands: []*cli.Command{{
			Name: "auth",
			Usage: "write the NATS server's authorization block (DIR/auth.conf, to include in its configuration) and a credentials " +
				"file DIR/AGENT.creds (0600, never printed) for the leader and each worker, each allowed only what its role does; " +
				"run it again with the same DIR to add agents: the server admits them without a restart or reload",
			UsageText: "crew nats auth --out ./nats --leader lead t1 t2\n" +
				"crew nats auth --out ./nats t3          # a task added later: no restart\n" +
				"nats-server -c crew.conf                # with: include ./nats/auth.conf",
			ArgsUsage: "[WORKER...]",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "out", Usage: "`DIR` of the signing keys (0600), auth.conf and the credentials files", Required: true},
				&cli.StringFlag{Name: "leader", Usage: "the leader's agent `NAME`: its credentials may create runs and tasks and act as the leader"},
			},
			Action: natsAuth,
		}},
	}
}
