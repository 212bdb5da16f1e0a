// crew init: create a .crew state root.

package main

import (
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/supervise"
)

func initCommand() *cli.Command {
	return &cli.Command{
		Name:      "init",
		Usage:     "create a .crew state root in the working directory (or --dir)",
		UsageText: "crew init\ncrew init --dir /tmp/crew-state\ncrew init --agents 1000   # and say which limits of this machine a crew of 1,000 would meet",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "agents", Value: supervise.CrewSize, Usage: "check the machine's limits (inotify instances, processes, process ids, open files) for a crew of `N` agents, and name those it would meet"},
		},
		Action: initRoot,
	}
}

func initRoot(c *cli.Context) error {
	e := newEnv(c)
	if err := e.fileOnly("init", "runs and mail live on the server, which needs no initialising (crew run create makes a run there)"); err != nil {
		return err
	}
	if c.Int("agents") < 1 {
		return fmt.Errorf("--agents %d: a crew has at least one agent: %w", c.Int("agents"), crew.ErrInvalid)
	}
	rec, err := app.InitRoot(app.Init{Dir: c.String("dir"), Perm: e.perm(), Agents: c.Int("agents")})
	if err != nil {
		return err
	}
	msg := "initialised crew state root in " + rec.Dir
	if rec.Existed {
		msg = "crew state root already exists in " + rec.Dir + "; nothing changed"
	} else if rec.Above != "" {
		// Like git init in a repository's subdirectory, but said:
		// commands run here used to find the root above.
		e.warn(fmt.Errorf("warning: %s is a state root above this one; commands run in %s and below now find %s instead (--dir %s reaches the other)",
			rec.Above, filepath.Dir(rec.Dir), rec.Dir, filepath.Dir(rec.Above)))
	}
	for _, l := range rec.Limits {
		// On standard output, after what init did: a note, not a warning
		// (nothing is wrong until the crew grows).
		msg += "\nnote: " + l.String()
	}
	return e.emit(rec, msg)
}
