//go:build unix

package supervise

import (
	"os"
	"os/exec"
	"os/signal"
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

// foreground makes cmd, when tty is a terminal, the leader of a new
// process group that becomes tty's foreground group (tcsetpgrp(3)), so
// that it reads the terminal and gets the signals typed there; when tty
// is no terminal, it does nothing (the worker shares this process's
// group, and is signalled alone).
func foreground(cmd *exec.Cmd, tty *os.File) {
	if _, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP); err != nil {
		return
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: int(tty.Fd())}
}

// TakeTerminal makes this process's group tty's foreground group again,
// after a worker that ran on it in the foreground (foreground) has
// exited, so that what a person types (Ctrl-C) reaches this process.
// A process of a background group that does so gets SIGTTOU, which is
// ignored meanwhile. It does nothing when tty is no terminal.
func TakeTerminal(tty *os.File) {
	if _, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP); err != nil {
		return
	}
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	unix.IoctlSetPointerInt(int(tty.Fd()), unix.TIOCSPGRP, unix.Getpgrp())
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
