package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	sjson "github.com/segmentio/encoding/json"
)

// Event types (docs/files.md, events.jsonl). One operation appends exactly one event.
const (
	RunCreated          = "run.created"
	TaskCreated         = "task.created"
	TaskStarted         = "task.started"
	TaskWaiting         = "task.waiting" // ask: carries the question
	TaskResponded       = "task.responded"
	TaskAskTimedOut     = "task.ask_timed_out" // without a default answer: carries a timeout message to the leader
	TaskCompleted       = "task.completed"
	TaskFailed          = "task.failed" // carries a failure message to the leader
	TaskCancelled       = "task.cancelled"
	TaskRetried         = "task.retried"
	MessageSent         = "message.sent" // steer, follow-up, nudge, report, broadcast
	MessageDelivered    = "message.delivered"
	MessageAcknowledged = "message.acknowledged"
	MessageRejected     = "message.rejected"
	LogRepaired         = "log.repaired"
	WorkerStarted       = "worker.started"    // crew spawn started a worker process: state.Worker
	WorkerExited        = "worker.exited"     // it exited, or was found gone: state.WorkerExit; failing its task, carries a failure message
	WorkerStopAsked     = "worker.stop_asked" // its supervisor is asked to stop it (crew run stop): state.StopAsk
)

// Types lists every event type, for validating `crew events --type`.
var Types = []string{RunCreated, TaskCreated, TaskStarted, TaskWaiting, TaskResponded,
	TaskAskTimedOut, TaskCompleted, TaskFailed, TaskCancelled, TaskRetried, MessageSent,
	MessageDelivered, MessageAcknowledged, MessageRejected, LogRepaired, WorkerStarted, WorkerExited, WorkerStopAsked}

// Event is one line of events.jsonl: an immutable record of something that
// happened in a run. Seq is 1, 2, 3 … with no gaps, assigned under the run
// lock. From and To are task states for task.* events. An event that sends
// a message embeds it whole; events about earlier messages (delivered,
// acknowledged, rejected) name them in MessageIDs.
type Event struct {
	Seq        int64    `json:"seq"`
	At         Time     `json:"at"`
	Type       string   `json:"type"`
	Run        string   `json:"run"`
	Task       string   `json:"task,omitempty"`
	Actor      string   `json:"actor,omitempty"`
	From       string   `json:"from,omitempty"`
	To         string   `json:"to,omitempty"`
	Reason     string   `json:"reason,omitempty"`
	Message    *Message `json:"message,omitempty"`
	MessageIDs []string `json:"messageIds,omitempty"`
	// Via, on message.delivered, is how the messages reached their
	// reader (ViaInbox, ViaMCP, ViaHook, ViaHTTPHook, ViaWake, ViaMail;
	// a hook's with its moment: "hook:tool-result"); "" when not told.
	Via  string          `json:"via,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// How a message reached its reader: Event.Via of message.delivered, and
// Message.DeliveredVia. A hook's (ViaHook, ViaHTTPHook) is followed by
// ":" and the moment of the agent's loop it was shown at (session-start,
// tool-result, stop, prompt: package app's Moment).
const (
	ViaInbox    = "inbox"     // crew inbox or crew outbox, or a reader of a mailbox through the library (run.Run.Inbox)
	ViaMCP      = "mcp"       // crew mcp's crew_inbox
	ViaHook     = "hook"      // crew hook AGENT EVENT, a command hook of the agent
	ViaHTTPHook = "http-hook" // an HTTP hook of the agent, answered by crew serve
	ViaWake     = "wake"      // crew hook claude wait, which woke the idle agent with it
	ViaMail     = "mail"      // crew mail read of the message's mail-tree copy
)

// Stamp gives an event validated for the log its place in it: run, seq,
// the time if it has none, and to the message it carries the same seq,
// run and time, and the status every stored message has (pending).
func (e *Event) Stamp(run string, seq int64) {
	e.Seq, e.Run = seq, run
	if e.At.IsZero() {
		e.At = Now()
	}
	if m := e.Message; m != nil {
		m.Seq, m.Run, m.SentAt, m.Status = seq, run, e.At, StatusPending
	}
}

// Message statuses. Stored messages always say pending; the current status
// is computed from message.delivered/acknowledged/rejected events.
const (
	StatusPending      = "pending"
	StatusDelivered    = "delivered"
	StatusAcknowledged = "acknowledged"
	StatusRejected     = "rejected"
)

// Message priorities (docs/concepts.md, Priorities). Priority does not
// change delivery; it orders a worker's pending list.
const (
	PriorityLow    = "low"
	PriorityNormal = "normal"
	PriorityHigh   = "high"
	PriorityUrgent = "urgent"
)

// Priorities lists every priority, lowest first: the one list that
// messages of a run (run.Send), mail of the tree (mailbox) and every
// front end accept. Do not modify it.
var Priorities = []string{PriorityLow, PriorityNormal, PriorityHigh, PriorityUrgent}

// DefaultPriority is the priority of a message or mail sent without one
// (an empty priority): normal.
const DefaultPriority = PriorityNormal

// PriorityRank orders priorities: low 0 … urgent 3; -1 if unknown.
func PriorityRank(p string) int {
	for i, q := range Priorities {
		if p == q {
			return i
		}
	}
	return -1
}

// Message is an immutable record sent from one participant to another: a
// line of inbox.jsonl, outbox.jsonl or steering.jsonl, and embedded in the
// event that sent it (docs/files.md, Messages). Status as stored is always "pending";
// readers fill Status, DeliveredAt, AcknowledgedAt and Reason from events.
type Message struct {
	ID             string          `json:"id"`
	Seq            int64           `json:"seq"`
	Run            string          `json:"run"`
	Task           string          `json:"task"`
	Kind           string          `json:"kind"`
	Direction      string          `json:"direction"`
	From           string          `json:"from"`
	To             string          `json:"to"`
	Body           string          `json:"body"`
	Priority       string          `json:"priority"`
	Status         string          `json:"status"`
	SentAt         Time            `json:"sentAt"`
	DeliveredAt    *Time           `json:"deliveredAt,omitempty"`
	DeliveredVia   string          `json:"deliveredVia,omitempty"` // how: the Via of its message.delivered
	AcknowledgedAt *Time           `json:"acknowledgedAt,omitempty"`
	RejectedAt     *Time           `json:"rejectedAt,omitempty"`
	Reason         string          `json:"reason,omitempty"`
	ReplyTo        string          `json:"replyTo,omitempty"`
	Data           json.RawMessage `json:"data,omitempty"`
}

// File names the mailbox file a message is projected into (Inbox,
// Outbox or Steering): its kind's (KindInfo.File), or its direction for
// a kind this version does not know.
func (m *Message) File() string {
	if k, ok := KindOf(m.Kind); ok {
		return k.File
	}
	return m.Direction
}

// Time is a UTC instant that marshals as RFC 3339 with exactly three
// fractional digits ("2026-11-29T21:04:05.123Z"), so stamps sort as text.
type Time struct{ time.Time }

// TimeLayout is the layout of Time in JSON.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Now returns the current time truncated to milliseconds.
func Now() Time { return Time{time.Now().UTC().Truncate(time.Millisecond)} }

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.UTC().Format(TimeLayout) + `"`), nil
}

// UnmarshalJSON accepts any RFC 3339 time whose UTC year is 0000-9999 (the
// years TimeLayout can write back) and cuts it to whole milliseconds, so a
// decoded Time marshals back to the instant it holds.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' && bytes.IndexByte(b[1:n-1], '\\') < 0 {
		// A string without escapes, as every time crew writes is: its
		// bytes are its value. (json.Unmarshal, called once per time,
		// was a fifth of the instructions of a reader's snapshot.)
		s = string(b[1 : n-1])
	} else if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	v = v.UTC()
	if y := v.Year(); y < 0 || y > 9999 {
		return fmt.Errorf("time %q is outside years 0000-9999 in UTC", s)
	}
	t.Time = v.Add(-time.Duration(v.Nanosecond() % int(time.Millisecond)))
	return nil
}

// String formats t as in JSON.
func (t Time) String() string { return t.UTC().Format(TimeLayout) }

// Marshal encodes v as one compact JSON line with its trailing '\n'. HTML
// characters are not escaped, so lines read naturally in jq and less.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Decode parses one event line. It checks the fields every event must have
// (a positive seq and a type), so a line that is valid JSON but no event is
// reported as damage. Like DecodeMessage it decodes with
// github.com/segmentio/encoding/json, which gives what encoding/json
// gives (TestDecodeAsStdlib, FuzzDecodeAsStdlib) in less time: a
// process replaying the log is mostly this decoding.
func Decode(line []byte) (Event, error) {
	var e Event
	if err := sjson.Unmarshal(line, &e); err != nil {
		return Event{}, err
	}
	if e.Seq <= 0 {
		return Event{}, fmt.Errorf("no seq")
	}
	if e.Type == "" {
		return Event{}, fmt.Errorf("no type")
	}
	return e, nil
}

// DecodeMessage parses one mailbox line. It decodes with
// github.com/segmentio/encoding/json, which gives what encoding/json
// gives (the same message, an error for the same lines:
// TestDecodeMessageAsStdlib, FuzzDecodeMessageAsStdlib) in about a third
// of the time: a reader's inbox of a hundred thousand messages is mostly
// this decoding.
func DecodeMessage(line []byte) (Message, error) {
	var m Message
	if err := sjson.Unmarshal(line, &m); err != nil {
		return Message{}, err
	}
	if m.ID == "" || m.Seq <= 0 || m.Kind == "" {
		return Message{}, fmt.Errorf("not a message: no id, seq or kind")
	}
	return m, nil
}
