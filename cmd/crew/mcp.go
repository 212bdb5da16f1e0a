// crew mcp: crew's operations as MCP tools over standard input and
// output (package mcpserver), each tool call an operation of the
// command line's App (package app). The command is in both builds; it is
// served by the full one (mcp_serve.go).

package main

import (
	"github.com/urfave/cli/v2"
)

func mcpCommand() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve crew's operations as MCP tools on standard input and output (Claude Code, Codex, any MCP client)",
		UsageText: "claude mcp add crew -e CREW_RUN=r1 -e CREW_TASK=t1 -- crew mcp\n" +
			"crew mcp --run r1 --task t1   # a worker's server\ncrew mcp --run r1              # the leader's",
		Flags: []cli.Flag{runFlag, taskFlag, asFlag,
			&cli.StringFlag{Name: "progress-every", Usage: "interval of crew_ask's progress notifications while it waits, a `DURATION` (default 5s)", Hidden: true},
		},
		Action: serveMCP,
	}
}
