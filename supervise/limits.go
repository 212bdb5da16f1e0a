package supervise

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CrewSize is the crew the machine's limits are checked for when none is
// given (crew init --agents): a hundred agents on one machine (Limits).
const CrewSize = 100

// threadsPerProcess is about how many threads a waiting crew process has
// (Go's runtime: a few per processor and one per blocked system call):
// Linux counts threads against the user's process limit and kernel.pid_max.
const threadsPerProcess = 8

// A Limit is a limit of the machine that a crew of Agents agents would
// run into: its name, its value, what it bounds and how to raise it
// (docs/files.md, Wake-ups and limits).
type Limit struct {
	Name   string `json:"name"`   // fs.inotify.max_user_instances, RLIMIT_NPROC, ...
	Value  int64  `json:"value"`  // its value now
	Need   int64  `json:"need"`   // what a crew of Agents needs
	Agents int    `json:"agents"` // the crew's size it was checked for
	Says   string `json:"says"`   // what it bounds and how to raise it
}

// Limits returns the limits of this machine that a crew of agents
// agents (CrewSize when agents <= 0) would run into (none where they are high enough, or cannot be
// read): the inotify instances of the processes that watch a whole run
// (crew serve, crew watch, crew run wait, crew events --follow, crew
// spawn --tmux: past the limit they look once a second; a worker waiting
// for its answer uses a FIFO instead), the user's processes and threads,
// the system's process ids, and the open files of one process.
func Limits(agents int) []Limit {
	if agents <= 0 {
		agents = CrewSize
	}
	var out []Limit
	add := func(name string, value, need int64, says string) {
		if value > 0 && value < need {
			out = append(out, Limit{Name: name, Value: value, Need: need, Agents: agents, Says: says})
		}
	}
	crew := int64(agents)
	add("fs.inotify.max_user_instances", procInt("/proc/sys/fs/inotify/max_user_instances"), crew+24,
		"each process watching a whole run holds one inotify instance, and those past the limit look for news once a second instead (a worker waiting in crew ask --wait needs none); raise it with: sudo sysctl fs.inotify.max_user_instances=2048")
	n := crew * 2 * threadsPerProcess // an agent and its crew spawn, or a waiting crew command
	add("RLIMIT_NPROC", nprocLimit(), n,
		"the user's processes and threads (ulimit -u), which each agent, its crew spawn and the crew commands it runs count against; raise it in /etc/security/limits.conf (nproc) or with ulimit -u")
	add("kernel.pid_max", procInt("/proc/sys/kernel/pid_max"), n+4096,
		"every thread on the machine takes a process id; raise it with: sudo sysctl kernel.pid_max=4194304")
	add("RLIMIT_NOFILE", nofileLimit(), 1024,
		"a commit's projection keeps up to 512 agents' mail directories open (ulimit -n)")
	return out
}

// String is the limit as crew init says it.
func (l Limit) String() string {
	return fmt.Sprintf("%s is %d, below the %d a crew of %d agents needs: %s", l.Name, l.Value, l.Need, l.Agents, l.Says)
}

// procInt reads a number from a /proc file; 0 when it cannot.
func procInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v
}
