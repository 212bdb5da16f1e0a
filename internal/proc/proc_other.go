//go:build unix && !linux

package proc

import (
	"errors"
	"syscall"
)

// stat knows no start time outside Linux.
func stat(int) (start uint64, zombie, ok bool) { return 0, false, false }

// pidAlive reports whether a process with pid exists (kill(2) with
// signal 0: EPERM means it exists but is another user's).
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// BootID is unknown outside Linux.
func BootID() string { return "" }

// GroupAlive reports whether process group pgid has a process (kill(2)
// of -pgid with signal 0; EPERM: one of another user's). A zombie
// counts: there is no /proc to tell it apart.
func GroupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Live lists no process here: there is no /proc to read.
func Live() []Stat { return nil }
