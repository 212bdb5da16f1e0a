package state

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

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
	Supervisor      int    `json:"supervisor"`
	SupervisorStart uint64 `json:"supervisorStart,omitempty"`
	Log             string `json:"log,omitempty"`  // the file its output goes to
	Tmux            string `json:"tmux,omitempty"` // the tmux window it runs in (SESSION:WINDOW), if any
	// Grace is how long, in milliseconds, its crew spawn waits after
	// SIGTERM before SIGKILL when it stops the worker (crew spawn
	// --grace; 0 in a record older than the field: DefaultGrace).
	Grace     int64        `json:"graceMs,omitempty"`
	StartedAt events.Time  `json:"startedAt"`
	Exit      *WorkerExit  `json:"exit,omitempty"`
	ExitedAt  *events.Time `json:"exitedAt,omitempty"`
	// Stop is set once its supervisor is asked to stop it (StopAsk):
	// its task was ended by someone other than its worker, or crew run
	// stop asked.
	Stop *StopAsk `json:"stop,omitempty"`
}

// DefaultGrace is how long crew spawn waits, after SIGTERM to a worker
// it stops, before SIGKILL, unless --grace says otherwise.
const DefaultGrace = 10 * time.Second

// GraceOf is how long w's crew spawn waits between SIGTERM and SIGKILL
// when it stops w (Worker.Grace, else DefaultGrace).
func (w *Worker) GraceOf() time.Duration {
	if w.Grace > 0 {
		return time.Duration(w.Grace) * time.Millisecond
	}
	return DefaultGrace
}

// StopAsk is a request, recorded in the log, that a worker's supervisor
// (the crew spawn that started it, on the worker's machine) stop it
// (docs/concepts.md, Stopping workers). The reducer records one when a
// task with a live worker is ended by anyone other than its worker (the
// event that ended it is the request), and for a worker.stop_asked event
// (crew run stop, for a worker whose task had ended already), whose Data
// is {"attempt":N}.
type StopAsk struct {
	At     events.Time `json:"at"`
	By     string      `json:"by"`     // the actor of the event that asked
	Reason string      `json:"reason"` // "task cancelled", "run stopped", …
}

// Stopped is how a worker's supervisor (or, when that was gone, crew
// run stop) stopped it: the Stopped of its worker.exited. The outcome is the exit itself (WorkerExit.Signal or
// Code).
type Stopped struct {
	// PID is the process signalled; Group says whether its whole
	// process group (-PID, kill(2)) was, as for a worker crew spawn
	// runs outside a terminal.
	PID   int  `json:"pid"`
	Group bool `json:"group,omitempty"`
	// Signals are those sent, in order: "SIGTERM", then "SIGKILL" when
	// the worker outlived the grace period (GraceMs, milliseconds).
	Signals []string `json:"signals"`
	GraceMs int64    `json:"graceMs"`
	Reason  string   `json:"reason"` // why: the StopAsk's reason, or "crew spawn was interrupted"
	// By is who signalled: "crew spawn" (its supervisor), or "crew run
	// stop" for a worker whose crew spawn was gone.
	By string `json:"by"`
}

// Describe says what the supervisor did: "SIGTERM to process group 42
// (task cancelled)", "SIGTERM, then SIGKILL after 10s, to process 42 (…)".
func (s *Stopped) Describe() string {
	what := strings.Join(s.Signals, ", then ")
	if len(s.Signals) > 1 {
		what = fmt.Sprintf("%s after %s,", what, time.Duration(s.GraceMs)*time.Millisecond)
	}
	target := "process"
	if s.Group {
		target = "process group"
	}
	return fmt.Sprintf("%s to %s %d (%s)", what, target, s.PID, s.Reason)
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
	// Stopped, when its supervisor stopped it, says how (signals, to
	// which process or group, why).
	Stopped *Stopped `json:"stopped,omitempty"`
}

// Describe says how the worker ended, for a reason: "exited with status
// 2", "was killed by signal killed", "is gone (exit status unknown)".
func (x *WorkerExit) Describe() string {
	if x.Stopped != nil {
		return x.describe() + ", stopped by " + x.Stopped.By + ": " + x.Stopped.Describe()
	}
	return x.describe()
}

func (x *WorkerExit) describe() string {
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
	case events.WorkerStopAsked:
		var a struct {
			Attempt int `json:"attempt"`
		}
		if err := json.Unmarshal(e.Data, &a); err != nil {
			return fmt.Errorf("seq %d: bad worker.stop_asked: %w", e.Seq, err)
		}
		if w := t.Live(); w != nil && w.Attempt == a.Attempt && w.Stop == nil {
			w.Stop = &StopAsk{At: e.At, By: e.Actor, Reason: e.Reason}
		}
	}
	return nil
}

// StopAskData is the Data of a worker.stop_asked event for attempt n.
func StopAskData(n int) json.RawMessage { return WorkerData(map[string]int{"attempt": n}) }

// askStop records, after a transition event e ended t, that t's live
// worker is to be stopped when e's actor is not that worker (the task's
// agent): a task cancelled, failed or completed by the leader, the
// dashboard or crew itself. A worker that ends its own task exits on its
// own; it is not stopped.
func askStop(t *Task, e *events.Event) {
	w := t.Live()
	if w == nil || w.Stop != nil || !t.Status.Terminal() || strings.EqualFold(e.Actor, t.Agent) {
		return
	}
	w.Stop = &StopAsk{At: e.At, By: e.Actor, Reason: "task " + string(t.Status)}
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
