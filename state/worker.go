package state

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/crew-dev/crew/events"
)

// Worker is one attempt of a supervised worker process, started by crew
// spawn: the Data of a worker.started event, and an entry of
// Task.Workers (with Exit once it ended). Processes are named by pid and
// start time, so that a pid the kernel reuses for another process is
// never taken for the worker (docs/concepts.md, Supervised workers).
type Worker struct {
	Attempt int      `json:"attempt"` // 1, 2, … per task
	PID     int      `json:"pid"`
	Start   uint64   `json:"start,omitempty"` // the process's start time, in clock ticks after boot (/proc/PID/stat, field 22); 0 when unknown
	Host    string   `json:"host"`
	Boot    string   `json:"boot,omitempty"` // the host's boot id (/proc/sys/kernel/random/boot_id): a reboot ends every process
	Command []string `json:"command"`
	// Supervisor and SupervisorStart name the crew spawn process that
	// waits for the worker and records its exit.
	Supervisor      int          `json:"supervisor"`
	SupervisorStart uint64       `json:"supervisorStart,omitempty"`
	Log             string       `json:"log,omitempty"`  // the file its output goes to
	Tmux            string       `json:"tmux,omitempty"` // the tmux window it runs in (SESSION:WINDOW), if any
	StartedAt       events.Time  `json:"startedAt"`
	Exit            *WorkerExit  `json:"exit,omitempty"`
	ExitedAt        *events.Time `json:"exitedAt,omitempty"`
}

// WorkerExit is how a worker attempt ended: the Data of a worker.exited
// event. Exactly one of Code, Signal and Unknown says how.
type WorkerExit struct {
	Attempt int    `json:"attempt"`
	PID     int    `json:"pid"`
	Code    *int   `json:"code,omitempty"`    // its exit status
	Signal  string `json:"signal,omitempty"`  // the signal that ended it ("killed", "terminated")
	Unknown bool   `json:"unknown,omitempty"` // found gone by a reader after its crew spawn died: how it ended is not known
	Tail    string `json:"tail,omitempty"`    // the last bytes of its output
}

// Describe says how the worker ended, for a reason: "exited with status
// 2", "was killed by signal killed", "is gone (exit status unknown)".
func (x *WorkerExit) Describe() string {
	switch {
	case x.Code != nil:
		return fmt.Sprintf("exited with status %d", *x.Code)
	case x.Signal != "":
		return "was ended by signal " + x.Signal
	}
	return "is gone (its exit status is unknown: crew spawn, which watched it, died too)"
}

// Success reports whether the worker exited with status 0.
func (x *WorkerExit) Success() bool { return x.Code != nil && *x.Code == 0 }

// Data returns w (or x) as the Data of its event.
func WorkerData(v any) json.RawMessage {
	data, _ := json.Marshal(v)
	return data
}

// Live returns the task's current worker attempt when it has not been
// recorded as exited, else nil.
func (t *Task) Live() *Worker {
	if n := len(t.Workers); n > 0 && t.Workers[n-1].Exit == nil {
		return &t.Workers[n-1]
	}
	return nil
}

// worker folds worker.started and worker.exited into t.
func (s *State) worker(t *Task, e *events.Event) error {
	if t == nil {
		return nil
	}
	switch e.Type {
	case events.WorkerStarted:
		var w Worker
		if err := json.Unmarshal(e.Data, &w); err != nil {
			return fmt.Errorf("seq %d: bad worker.started: %w", e.Seq, err)
		}
		w.StartedAt, w.Exit, w.ExitedAt = e.At, nil, nil
		t.Workers = append(t.Workers, w)
	case events.WorkerExited:
		var x WorkerExit
		if err := json.Unmarshal(e.Data, &x); err != nil {
			return fmt.Errorf("seq %d: bad worker.exited: %w", e.Seq, err)
		}
		for i := range t.Workers {
			if w := &t.Workers[i]; w.Attempt == x.Attempt && w.Exit == nil {
				at := e.At
				w.Exit, w.ExitedAt = &x, &at
			}
		}
	}
	return nil
}

// signOfLife reports whether event e, about a task, is something its
// worker did: an event whose actor is neither the leader nor crew itself
// (docs/concepts.md, Liveness). A worker's process exiting is not one.
func (s *State) signOfLife(e *events.Event) bool {
	a := e.Actor
	return a != "" && a != Leader && a != CrewActor && !strings.EqualFold(a, s.Leader) && e.Type != events.WorkerExited
}

// CrewActor is the actor of the events crew writes on its own: log.repaired,
// and worker.exited.
const CrewActor = "crew"
