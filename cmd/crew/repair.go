// crew repair: verify a run's log, quarantine damage, rebuild projections.

package main

import (
	"fmt"
	"strings"

	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/store"
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
		Action:    repair,
	}
}

func repair(c *cli.Context) error {
	e := newEnv(c)
	id, err := e.runArg()
	if err != nil {
		return err
	}
	rep, err := e.app().Repair(c.Context, app.RunRef{Run: id})
	if err != nil {
		return err
	}
	return e.emit(rep, repairText(rep))
}

// repairText is the human form of a repair report.
func repairText(rep *store.RepairReport) string {
	var copies string
	if rep.CopiesRemoved > 0 {
		copies = fmt.Sprintf("\n  mail-tree copies of messages no longer in the log removed: %d", rep.CopiesRemoved)
	}
	if len(rep.Damaged) == 0 && len(rep.LostSeqs) == 0 {
		return fmt.Sprintf("run %s: %s; log is healthy; projections rebuilt", rep.Run, human.Count(int(rep.Events), "event")) + copies
	}
	// The first places, not all: a log replaced by garbage has one per
	// line (--json lists them all).
	const shown = 20
	var b strings.Builder
	fmt.Fprintf(&b, "run %s: %s", rep.Run, human.Count(len(rep.Damaged), "damaged place"))
	for i, d := range rep.Damaged {
		if i == shown {
			fmt.Fprintf(&b, "\n  ... and %d more (crew repair --json lists them all)", len(rep.Damaged)-shown)
			break
		}
		b.WriteString("\n  " + human.Escape(d))
	}
	if rep.Quarantine != "" {
		b.WriteString("\n  damaged bytes moved to " + rep.Quarantine)
	}
	if len(rep.LostSeqs) > 0 {
		fmt.Fprintf(&b, "\n  lost seqs %v (filled with log.repaired)", rep.LostSeqs)
	}
	b.WriteString(copies)
	fmt.Fprintf(&b, "\n  logged log.repaired as seq %d; projections rebuilt", rep.RepairedSeq)
	return b.String()
}
