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
// an orphan, by init, which may take its time), does not count (Live).
func GroupAlive(pgid int) bool {
	for _, p := range Live() {
		if p.PGID == pgid {
			return true
		}
	}
	return false
}

// Live lists the processes that have not exited, as every /proc/PID/stat
// shows them (proc(5)): its state (field 3) neither Z (a zombie, exited
// but not yet reaped) nor X (dead), with its parent, process group and
// session (fields 4, 5 and 6). The command name (field 2) may hold
// spaces and parentheses, so the fields are counted after its last ')'.
func Live() []Stat {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Stat
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
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
		if len(f) < 4 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		s := Stat{PID: pid}
		s.PPID, _ = strconv.Atoi(f[1])
		s.PGID, _ = strconv.Atoi(f[2])
		s.Session, _ = strconv.Atoi(f[3])
		out = append(out, s)
	}
	return out
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
