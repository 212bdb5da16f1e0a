package guarantee

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// proc is a live process as /proc shows it.
type proc struct {
	pid, ppid, pgid int
}

// liveProcs lists the processes that are alive (not zombies: a zombie has
// already closed its files and released its locks) by reading /proc/*/stat.
func liveProcs() []proc {
	ents, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgid, _ := strconv.Atoi(f[2])
		out = append(out, proc{pid: pid, ppid: ppid, pgid: pgid})
	}
	return out
}

// killChildren sends SIGKILL to the live children of pid and returns how
// many it signalled.
func killChildren(pid int) int {
	n := 0
	for _, p := range liveProcs() {
		if p.ppid == pid {
			if syscall.Kill(p.pid, syscall.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}

// children returns the pids of the live children of pid.
func children(pid int) []int {
	var out []int
	for _, p := range liveProcs() {
		if p.ppid == pid {
			out = append(out, p.pid)
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

// groupAlive reports whether any live process is in process group pgid.
func groupAlive(pgid int) bool {
	for _, p := range liveProcs() {
		if p.pgid == pgid {
			return true
		}
	}
	return false
}
