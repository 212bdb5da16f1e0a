//go:build linux

package run

import (
	"context"
	"os/exec"
	"runtime"
	"syscall"
)

// checkGuard is the shell that runs a check on Linux ($1 is the check):
// it runs the check in the background and waits for it, so that a
// SIGTERM reaches its trap at once (a shell runs traps only between
// commands, and wait is one), and the trap kills the whole process group
// with SIGKILL, the check's children included. Its exit status is the
// check's.
const checkGuard = `trap 'kill -KILL 0' TERM; sh -c "$1" & wait $!`

// checkCommand returns the command that runs a done-when check, script,
// with sh -c: leader of a process group of its own, killed whole when
// ctx ends (processGroup), and killed whole when the process that runs
// it dies too, even by SIGKILL, which leaves it no chance to clean up.
// For that the shell is a guard (checkGuard) that the kernel sends
// SIGTERM when its parent dies (prctl(2) PR_SET_PDEATHSIG, which Go
// sets in the child as SysProcAttr.Pdeathsig). A parent-death signal
// reaches only the process it was set for, not its children, hence the
// guard.
//
// The check runs as the guard's asynchronous command, so it starts with
// SIGINT and SIGQUIT ignored (POSIX, Shell Command Language, 2.11) and
// standard input empty, as it was anyway; it is never in the terminal's
// foreground, so Ctrl-C reaches crew, which kills the group.
func checkCommand(ctx context.Context, script string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", checkGuard, "crew-check", script)
	processGroup(cmd)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	return cmd
}

// runCheck runs cmd on a locked OS thread: the parent-death signal comes
// when the thread that started the child exits, not the process
// (prctl(2); golang.org/issue/27505), and a locked thread does not exit
// while the goroutine holds it.
func runCheck(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Run()
}
