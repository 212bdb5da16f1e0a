//go:build !unix

package run

import "os/exec"

// processGroup is a no-op where process groups do not exist: cancellation
// kills the command's own process only.
func processGroup(cmd *exec.Cmd) {}
