package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "write a report of the run: markdown, junit, mermaid or json",
		UsageText: "crew run report r1 --format markdown >> \"$GITHUB_STEP_SUMMARY\"\n   crew run report --format junit > crew-junit.xml",
		ArgsUsage: "[RUN]",
		Flags: []cli.Flag{runFlag,
			&cli.StringFlag{Name: "format", Usage: "`FORMAT`: markdown, junit, mermaid or json", Value: "markdown"},
		},
		Action: func(c *cli.Context) error {
			e := newEnv(c)
			r, err := e.runArg()
			if err != nil {
				return err
			}
			st, err := r.State()
			if err != nil {
				return err
			}
			switch c.String("format") {
			case "json":
				return e.emit(map[string]any{"manifest": r.Manifest, "tasks": st.TaskList()}, "")
			default:
				return fmt.Errorf("unknown report format %q: use markdown, junit, mermaid or json: %w", c.String("format"), crew.ErrInvalid)
			}
		},
	}
}
