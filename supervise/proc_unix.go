//go:build unix

package supervise

import (
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/crew-dev/crew/internal/proc"
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

// signalWorker sends sig to process pid's group (when group: the
// worker leads one), else to the process.
func signalWorker(pid int, group bool, sig syscall.Signal) {
	if group {
		pid = -pid
	}
	syscall.Kill(pid, sig)
}

// ownGroup reports whether cmd leads a process group of its own
// (groupLeader), which stopGroup signals whole.
func ownGroup(cmd *exec.Cmd) bool { return cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid }

// groupAlive reports whether process group pgid has a process that
// has not exited (proc.GroupAlive).
func groupAlive(pgid int) bool { return proc.GroupAlive(pgid) }

// signalOf names the signal that ended the process ("killed",
// "terminated"), or "" when it exited.
func signalOf(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}

// touch sets the modification (and access) time of the file at path to
// t without following a symbolic link there (utimensat(2) with
// AT_SYMLINK_NOFOLLOW): crew writes through no link (docs/files.md,
// Permissions).
func touch(path string, t time.Time) error {
	ts := unix.NsecToTimespec(t.UnixNano())
	err := unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return &os.PathError{Op: "utimensat", Path: path, Err: err}
	}
	return nil
}
