package state

import (
	"encoding/json"

	"github.com/crew-dev/crew/events"
)

// Ask is the Data of a question asked with a deadline (crew ask
// --timeout D [--default TEXT]): when it runs out unanswered, the
// worker goes on with Default, or without an answer when there is none
// (docs/state-machine.md, Asking with a deadline). Kept in the question,
// so a worker that restarts and awaits it honours the same deadline.
type Ask struct {
	Deadline events.Time `json:"deadline"`
	Default  *string     `json:"default,omitempty"`
}

// AskData returns a as a question's Data.
func AskData(a Ask) json.RawMessage {
	data, _ := json.Marshal(a)
	return data
}

// AskOf returns the deadline and default answer of question m, or nil
// when it was asked without a deadline.
func AskOf(m *events.Message) *Ask {
	if m == nil || m.Kind != events.KindQuestion || len(m.Data) == 0 {
		return nil
	}
	var a Ask
	if json.Unmarshal(m.Data, &a) != nil || a.Deadline.IsZero() {
		return nil
	}
	return &a
}

// timedOutData is the Data of a task.ask_timed_out event whose question
// was answered by default.
type timedOutData struct {
	Default *string `json:"default,omitempty"`
}

// TimedOutData returns the Data of a task.ask_timed_out event that
// answers its question with def.
func TimedOutData(def string) json.RawMessage {
	data, _ := json.Marshal(timedOutData{Default: &def})
	return data
}

// DefaultOf returns the default answer a task.ask_timed_out event gave
// its question, or nil when it gave none (the worker went on without an
// answer).
func DefaultOf(e *events.Event) *string {
	if e.Type != events.TaskAskTimedOut || len(e.Data) == 0 {
		return nil
	}
	var d timedOutData
	if json.Unmarshal(e.Data, &d) != nil {
		return nil
	}
	return d.Default
}
