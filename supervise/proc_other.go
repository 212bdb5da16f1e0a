//go:build !unix

package supervise

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// groupLeader does nothing here: there are no process groups.
func groupLeader(*exec.Cmd) {}

// stopGroup kills cmd's process.
func stopGroup(cmd *exec.Cmd, _ syscall.Signal) { cmd.Process.Kill() }

// signalWorker kills process pid.
func signalWorker(pid int, _ bool, _ syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

// foreground does nothing here: there are no process groups.
func foreground(*exec.Cmd, *os.File) {}

// TakeTerminal does nothing here: there are no process groups.
func TakeTerminal(*os.File) {}

// ownGroup is false here: there are no process groups.
func ownGroup(*exec.Cmd) bool { return false }

// groupAlive is false here: there are no process groups.
func groupAlive(int) bool { return false }

// signalOf is "" here: a process only exits.
func signalOf(*os.ProcessState) string { return "" }

// touch sets the modification time of the file at path to t.
func touch(path string, t time.Time) error { return os.Chtimes(path, t, t) }
