//go:build !linux

package run

import (
	"context"
	"os/exec"
)

// checkCommand returns the command that runs a done-when check, script,
// with sh -c, leader of a process group of its own that is killed whole
// when ctx ends (processGroup). Only Linux (done_linux.go) also has it
// die with the process that runs it when that one is killed with
// SIGKILL.
func checkCommand(ctx context.Context, script string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	processGroup(cmd)
	return cmd
}

// runCheck runs cmd.
func runCheck(cmd *exec.Cmd) error { return cmd.Run() }
