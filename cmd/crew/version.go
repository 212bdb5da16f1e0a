// crew version: print crew's version (as --version does).

package main

import "github.com/urfave/cli/v2"

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print crew's version",
		UsageText: "crew version",
		Action:    printVersion,
	}
}

func printVersion(c *cli.Context) error {
	return newEnv(c).emit(map[string]string{"version": version}, "crew "+version)
}
