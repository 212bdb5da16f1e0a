// crew init: create a .crew state root.

package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew/run"
)

func initCommand() *cli.Command {
	return &cli.Command{
		Name:      "init",
		Usage:     "create a .crew state root in the working directory (or --dir)",
		UsageText: "crew init\ncrew init --dir /tmp/crew-state",
		Action:    initRoot,
	}
}

func initRoot(c *cli.Context) error {
	e := newEnv(c)
	if err := e.fileOnly("init", "runs and mail live on the server, which needs no initialising (crew run create makes a run there)"); err != nil {
		return err
	}
	dir := c.String("dir")
	if dir == "" {
		dir = "."
	}
	// Like git init DIR: a directory that does not exist yet is
	// created (with the umask's modes; .crew itself gets crew's,
	// also when DIR names it).
	parent := dir
	if filepath.Base(dir) == run.DirName {
		parent = filepath.Dir(dir)
	}
	if err := os.MkdirAll(parent, 0o777); err != nil {
		return err
	}
	_, statErr := os.Stat(filepath.Join(parent, run.DirName))
	above := run.Above(dir)
	root, err := run.Init(dir, e.perm())
	if err != nil {
		return err
	}
	msg := "initialised crew state root in " + root.Dir()
	if statErr == nil {
		msg = "crew state root already exists in " + root.Dir() + "; nothing changed"
	} else if above != "" {
		// Like git init in a repository's subdirectory, but said:
		// commands run here used to find the root above.
		e.warn(fmt.Errorf("warning: %s is a state root above this one; commands run in %s and below now find %s instead (--dir %s reaches the other)",
			above, filepath.Dir(root.Dir()), root.Dir(), filepath.Dir(above)))
	}
	return e.emit(map[string]string{"dir": root.Dir()}, msg)
}
