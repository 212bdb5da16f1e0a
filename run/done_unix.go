//go:build unix

package run

import (
	"os/exec"
	"syscall"
)

// processGroup makes cmd the leader of a new process group and has its
// cancellation kill the whole group (kill(2) with a negative pid), so the
// children of a shell command are stopped with it.
func processGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
