package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

func repairCommand() *cli.Command {
	return &cli.Command{
		Name:  "repair",
		Usage: "verify the log, quarantine damaged bytes (nothing is deleted) and rebuild every projection",
		UsageText: "crew repair r1\n" +
			"crew repair --json",
		ArgsUsage: "[RUN]",
		Flags:     []cli.Flag{runFlag},
		Action: func(c *cli.Context) error {
			e := newEnv(c)
			r, err := e.runArg()
			if err != nil {
				return err
			}
			rep, err := r.Repair(c.Context)
			if err != nil {
				return err
			}
			human := fmt.Sprintf("run %s: %d events; log is healthy; projections rebuilt", rep.Run, rep.Events)
			if len(rep.Damaged) > 0 || len(rep.LostSeqs) > 0 {
				// The first places, not all: a log replaced by garbage has
				// one per line (--json lists them all).
				const shown = 20
				var b strings.Builder
				fmt.Fprintf(&b, "run %s: %d damaged places", rep.Run, len(rep.Damaged))
				for i, d := range rep.Damaged {
					if i == shown {
						fmt.Fprintf(&b, "\n  ... and %d more (crew repair --json lists them all)", len(rep.Damaged)-shown)
						break
					}
					b.WriteString("\n  " + escape(d))
				}
				human = b.String()
				if rep.Quarantine != "" {
					human += "\n  damaged bytes moved to " + rep.Quarantine
				}
				if len(rep.LostSeqs) > 0 {
					human += fmt.Sprintf("\n  lost seqs %v (filled with log.repaired)", rep.LostSeqs)
				}
				human += fmt.Sprintf("\n  logged log.repaired as seq %d; projections rebuilt", rep.RepairedSeq)
			}
			return e.emit(rep, human)
		},
	}
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print crew's version",
		UsageText: "crew version",
		Action: func(c *cli.Context) error {
			return newEnv(c).emit(map[string]string{"version": version}, "crew "+version)
		},
	}
}
