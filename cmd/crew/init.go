// crew init: create a .crew state root.

package main

import (
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
	_, statErr := os.Stat(filepath.Join(dir, run.DirName))
	root, err := run.Init(dir, e.perm())
	if err != nil {
		return err
	}
	msg := "initialised crew state root in " + root.Dir()
	if statErr == nil {
		msg = "crew state root already exists in " + root.Dir() + "; nothing changed"
	}
	return e.emit(map[string]string{"dir": root.Dir()}, msg)
}
