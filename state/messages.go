package state

import (
	"encoding/json"
	"iter"

	"github.com/crew-dev/crew/events"
)

// MessageUpdate is a change an event makes to the status of a message
// sent earlier: pending → delivered → acknowledged | rejected
// (docs/state-machine.md, Message status).
type MessageUpdate struct {
	ID     string      // the message's id
	Task   string      // the reading participant's task ("" for the leader): names a broadcast's copy
	Status string      // events.StatusDelivered, StatusAcknowledged or StatusRejected
	At     events.Time // when
	Reason string      // why it was rejected, if it was
	Via    string      // how it was delivered (events.Event.Via), if it was
}

// MessageUpdates returns the status changes event e makes to earlier
// messages, in the order they apply:
//
//   - message.delivered, message.acknowledged and message.rejected name
//     the messages of their reader (the event's task, or the leader);
//   - task.responded acknowledges the question its response answers
//     (the leader has read it: it answered it);
//   - task.ask_timed_out rejects the question the worker stopped waiting
//     for, with the event's reason; one that answered it by default
//     leaves it open, for the leader to see and acknowledge.
//
// A delivered update applies only to a copy still pending; acknowledged
// and rejected are final. Events that change no message return nil.
// Apply uses the same rules; a reader of a run's whole history (crew run
// report) folds every event with them.
func MessageUpdates(e *events.Event) []MessageUpdate {
	var out []MessageUpdate
	for u := range messageUpdates(e) {
		if out == nil {
			out = make([]MessageUpdate, 0, max(len(e.MessageIDs), 1))
		}
		out = append(out, u)
	}
	return out
}

// messageUpdates yields what MessageUpdates returns, one update at a
// time: Apply folds a message.delivered event naming 100,000 messages
// without making 100,000 updates at once (about 10 MB).
func messageUpdates(e *events.Event) iter.Seq[MessageUpdate] {
	return func(yield func(MessageUpdate) bool) {
		status := ""
		switch e.Type {
		case events.MessageDelivered:
			status = events.StatusDelivered
		case events.MessageAcknowledged:
			status = events.StatusAcknowledged
		case events.MessageRejected, events.TaskAskTimedOut:
			if DefaultOf(e) != nil {
				return // answered by default: open for the leader to see, until it acknowledges it
			}
			status = events.StatusRejected
		case events.TaskResponded:
			if e.Message != nil && e.Message.ReplyTo != "" {
				yield(MessageUpdate{ID: e.Message.ReplyTo, Status: events.StatusAcknowledged, At: e.At})
			}
			return
		default:
			return
		}
		reader := e.Task
		if e.Type == events.TaskAskTimedOut {
			reader = "" // the question was the leader's to answer
		}
		for _, id := range e.MessageIDs {
			u := MessageUpdate{ID: id, Task: reader, Status: status, At: e.At}
			if status == events.StatusDelivered {
				u.Via = e.Via
			}
			if status == events.StatusRejected {
				u.Reason = e.Reason
			}
			if !yield(u) {
				return
			}
		}
	}
}

// Recipients returns who receives the message event e carries: the tasks
// of a broadcast (every task not yet ended when it was sent, as recorded
// in the event), the one task of any other leader -> worker message, and
// nil for a worker -> leader message (outbox) or an event without one.
func Recipients(e *events.Event) []string {
	m := e.Message
	switch {
	case m == nil || m.Direction == events.Outbox:
		return nil
	case m.To == events.Broadcast:
		var d broadcastData
		json.Unmarshal(e.Data, &d)
		return d.Recipients
	default:
		return []string{m.To}
	}
}
