//go:build linux

package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
)

// stat reads /proc/PID/stat: the process's start time (field 22) and
// whether it is a zombie (field 3, state Z, or X: dead). ok is false
// when there is no such process. The command name (field 2) is in
// parentheses and may hold spaces and parentheses itself, so the fields
// are counted after its last ')' (proc(5)).
func stat(pid int) (start uint64, zombie, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return 0, false, false
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, false, false
	}
	return start, f[0] == "Z" || f[0] == "X", true
}

// GroupAlive reports whether process group pgid has a process that has
// not exited: a zombie, exited but not yet reaped by its parent (or, for
// an orphan, by init, which may take its time), does not count. It
// reads the process group (field 5) and state (field 3) of every
// /proc/PID/stat.
func GroupAlive(pgid int) bool {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	want := strconv.Itoa(pgid)
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		// f[0] is field 3 (state), f[2] field 5 (pgrp).
		if len(f) > 2 && f[2] == want && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// pidAlive is only asked when /proc has no entry for pid: it is gone.
func pidAlive(int) bool { return false }

var bootOnce = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// BootID returns this boot's id ("" when it cannot be read).
func BootID() string { return bootOnce() }
