package state

import (
	"encoding/json"

	"github.com/crew-dev/crew/events"
)

// Check is the outcome of a task's done-when command, stored in the
// task.completed event as {"check": Check} (or shown by task verify).
type Check struct {
	Command  string  `json:"command"`
	ExitCode int     `json:"exitCode"`         // -1 when it did not exit (timeout, not startable)
	Output   string  `json:"output,omitempty"` // the last bytes of stdout and stderr, interleaved (run.CheckTail)
	Seconds  float64 `json:"seconds"`          // wall time
	TimedOut bool    `json:"timedOut,omitempty"`
}

// CheckData returns the Data of a task.completed event that stores c.
func CheckData(c *Check) json.RawMessage {
	data, _ := json.Marshal(map[string]any{"check": c})
	return data
}

// CheckOf returns the done-when check stored in a task.completed event, or
// nil when the event holds none.
func CheckOf(e *events.Event) *Check {
	if e.Type != events.TaskCompleted || len(e.Data) == 0 {
		return nil
	}
	var d struct {
		Check *Check `json:"check"`
	}
	if json.Unmarshal(e.Data, &d) != nil {
		return nil
	}
	return d.Check
}
