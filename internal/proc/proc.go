// Package proc tells whether a process recorded earlier is still the same
// running process: a pid together with the process's start time, so that
// a pid the kernel has given to a new process is never taken for the old
// one. On Linux it reads /proc (proc(5)); elsewhere the start time is
// unknown and a live pid is trusted.
package proc

import "os"

// ID names a process: its pid and its start time in clock ticks after
// boot (/proc/PID/stat, field 22 "starttime"; 0 when unknown), with the
// boot it belongs to (/proc/sys/kernel/random/boot_id; "" when unknown).
type ID struct {
	PID   int
	Start uint64
	Boot  string
}

// Self returns the ID of the calling process.
func Self() ID { return Of(os.Getpid()) }

// Of returns the ID of the running process pid: Start is 0 when it
// cannot be read (no such process, or no /proc).
func Of(pid int) ID {
	start, _, _ := stat(pid)
	return ID{PID: pid, Start: start, Boot: BootID()}
}

// Alive reports whether id's process still runs: a process with its pid
// exists, has not exited (a zombie, exited but not yet reaped, has), and
// started when id says, on the same boot. An ID with an unknown start
// time is alive while its pid is.
func (id ID) Alive() bool {
	if id.PID <= 0 {
		return false
	}
	if id.Boot != "" && BootID() != "" && id.Boot != BootID() {
		return false // the machine rebooted since
	}
	start, zombie, ok := stat(id.PID)
	if !ok {
		return pidAlive(id.PID)
	}
	if zombie {
		return false
	}
	return id.Start == 0 || start == id.Start
}

// Stat is a running process as the system lists it (Live): its pid, its
// parent's, its process group and its session.
type Stat struct {
	PID, PPID, PGID, Session int
}
