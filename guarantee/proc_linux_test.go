package guarantee

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/crew-dev/crew/internal/proc"
)

// killChildren sends SIGKILL to the live children of pid and returns how
// many it signalled.
func killChildren(pid int) int {
	n := 0
	for _, p := range proc.Live() {
		if p.PPID == pid {
			if syscall.Kill(p.PID, syscall.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}

// children returns the pids of the live children of pid.
func children(pid int) []int {
	var out []int
	for _, p := range proc.Live() {
		if p.PPID == pid {
			out = append(out, p.PID)
		}
	}
	return out
}

// hasOpen reports whether process pid has a file descriptor open on a
// path (or anonymous inode such as "anon_inode:inotify") containing name.
func hasOpen(pid int, name string) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if target, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.Contains(target, name) {
			return true
		}
	}
	return false
}
