package main

import (
	"bufio"

	"github.com/urfave/cli/v2"

	reports "github.com/crew-dev/crew/report"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "write a report of the run: markdown (job summary), junit (XML for test reporters), mermaid (sequence diagram) or json (the whole run)",
		UsageText: "crew run report r1 --format markdown >> \"$GITHUB_STEP_SUMMARY\"\n" +
			"crew run report --format junit > crew-junit.xml\n" +
			"crew run report --format mermaid\n" +
			"crew run report --format json | jq '.tasks[] | {id, status, seconds}'",
		ArgsUsage: "[RUN]",
		Flags: []cli.Flag{runFlag,
			&cli.StringFlag{Name: "format", Usage: "`FORMAT`: markdown, junit, mermaid or json (--json alone means json)", Value: reports.FormatMarkdown},
		},
		Action: func(c *cli.Context) error {
			e := newEnv(c)
			format := c.String("format")
			if e.json && !c.IsSet("format") {
				format = reports.FormatJSON // --json asks for machine output
			}
			if err := reports.CheckFormat(format); err != nil {
				return err
			}
			r, err := e.runArg()
			if err != nil {
				return err
			}
			w := bufio.NewWriter(e.stdout)
			err = reports.Render(w, r, format)
			if ferr := w.Flush(); err == nil {
				err = ferr
			}
			return err
		},
	}
}
