//go:build unix

package run

import (
	"os"
	"os/exec"
	"syscall"
)

// groupLeader makes cmd the leader of a new process group, so that the
// worker's children are signalled with it (stopGroup).
func groupLeader(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// stopGroup sends sig to cmd's process group when it leads one, else to
// cmd's process alone.
func stopGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
		syscall.Kill(-cmd.Process.Pid, sig)
		return
	}
	cmd.Process.Signal(sig)
}

// signalOf names the signal that ended the process ("killed",
// "terminated"), or "" when it exited.
func signalOf(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}
