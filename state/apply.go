package state

import (
	"encoding/json"
	"fmt"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/task"
)

// An Effect is what one event asks of the per-agent mail tree
// (docs/mail-tree.md): deliver a copy of a message to an agent, or mark
// copies the agent has seen as read. Apply returns them; the stores
// carry them out after the event is committed.
type Effect struct {
	Seq     int64           // the event's
	Agent   string          // whose mail directory
	Deliver *events.Message // a copy to deliver; nil when Seen is set
	Seen    []Copy          // copies the agent has seen: delivered, acknowledged, rejected or answered
}

// Copy names one message's copy in an agent's mail directory. From and
// SentAt are "" and zero when the state did not know them (it did not
// track the message): the store then finds the copy by ID.
type Copy struct {
	ID     string
	From   string
	SentAt events.Time
}

// Known reports whether the copy's name (mailbox.Name) can be made
// without looking for it.
func (c Copy) Known() bool { return c.From != "" }

// broadcastData is the Data of a broadcast's message.sent event: the
// tasks it went to (every non-terminal task when it was sent).
type broadcastData struct {
	Recipients []string `json:"recipients"`
}

// BroadcastData returns the Data of a broadcast's message.sent event
// naming its recipient tasks.
func BroadcastData(recipients []string) json.RawMessage {
	data, _ := json.Marshal(broadcastData{Recipients: recipients})
	return data
}

// Apply folds one event into the state and returns its effects on the
// mail tree, in the order they must be carried out. It trusts the event:
// validation happens before an event is written. An event whose Data
// does not decode is an error naming its seq, and changes nothing but
// Seq.
func (s *State) Apply(e *events.Event) ([]Effect, error) {
	s.Seq = e.Seq
	t := s.own(e.Task)
	if t != nil {
		t.LastEventAt = e.At
		if s.signOfLife(e) {
			at := e.At
			t.LastSeenAt = &at
		}
		if m := e.Message; m != nil && m.Kind == events.KindNudge {
			at := e.At
			t.NudgedAt = &at
		}
	}
	switch e.Type {
	case events.RunCreated:
		var m Manifest
		if err := json.Unmarshal(e.Data, &m); err != nil {
			return nil, fmt.Errorf("seq %d: bad run.created: %w", e.Seq, err)
		}
		s.Run, s.Leader = m.ID, m.Leader
		return nil, nil
	case events.TaskCreated:
		var spec TaskSpec
		if err := json.Unmarshal(e.Data, &spec); err != nil {
			return nil, fmt.Errorf("seq %d: bad task.created: %w", e.Seq, err)
		}
		if id, one := s.OneTask(); one && id != e.Task {
			return nil, nil // another task: a state for one task holds it only
		}
		s.Tasks[e.Task] = &Task{ID: e.Task, Title: spec.Title, Agent: spec.Agent, DoneWhen: spec.DoneWhen,
			Status: task.Pending, CreatedAt: e.At, UpdatedAt: e.At, LastEventAt: e.At, CreatedSeq: e.Seq, owner: s.owner}
		return nil, nil
	}
	if err := s.worker(t, e); err != nil {
		return nil, err
	}
	var effects []Effect
	if e.To != "" && t != nil {
		effects = s.transition(t, e, effects)
	}
	if e.Message != nil {
		effects = s.send(t, e, effects)
	}
	return s.update(e, effects), nil
}

// transition moves t to the event's To state. A task that leaves waiting
// closes its question: answered, timed out or moot.
func (s *State) transition(t *Task, e *events.Event, effects []Effect) []Effect {
	t.Status = task.State(e.To)
	t.UpdatedAt = e.At
	switch t.Status {
	case task.Running:
		if e.Type == events.TaskStarted {
			at := e.At
			t.StartedAt, t.EndedAt, t.Attempts = &at, nil, t.Attempts+1
		}
	case task.Completed, task.Failed, task.Cancelled:
		at := e.At
		t.EndedAt, t.Reason = &at, e.Reason
		askStop(t, e)
	case task.Pending:
		t.Reason, t.EndedAt = "", nil // retried: it has not ended now
	}
	if t.Question == "" || t.Status == task.Waiting {
		return effects
	}
	if e.Type == events.TaskResponded && t.QuestionAt != nil {
		// The leader has read the question: it answered it.
		effects = append(effects, Effect{Seq: e.Seq, Agent: s.Leader,
			Seen: []Copy{{ID: t.Question, From: t.QuestionFrom, SentAt: *t.QuestionAt}}})
	}
	if DefaultOf(e) == nil {
		delete(s.Open, t.Question) // (answered by default, it stays open for the leader: MessageUpdates)
	}
	t.Question, t.QuestionFrom, t.QuestionAt, t.ClosedSeq = "", "", nil, e.Seq
	return effects
}

// send opens the event's message for each of its recipients, and a
// question becomes its task's open question.
func (s *State) send(t *Task, e *events.Event, effects []Effect) []Effect {
	m := e.Message
	s.Files[m.File()] = m.Seq
	for _, recipient := range Recipients(e) {
		effects = s.open(m, recipient, e.Seq, effects)
	}
	if m.Direction == events.Outbox {
		effects = s.open(m, "", e.Seq, effects)
	}
	if m.Kind == events.KindQuestion && t != nil {
		at := m.SentAt
		t.Question, t.QuestionFrom, t.QuestionAt = m.ID, m.From, &at
		t.Questions++
	}
	return effects
}

// open opens m for recipient (a task id, or "" for the leader) and
// delivers its copy to the recipient's agent.
func (s *State) open(m *events.Message, recipient string, seq int64, effects []Effect) []Effect {
	effects = append(effects, Effect{Seq: seq, Agent: s.agentOf(recipient), Deliver: m})
	if s.Tracks(recipient) {
		s.Open[Key(m.ID, m.To, recipient)] = &Open{ID: m.ID, Seq: m.Seq, Task: recipient, Kind: Intern(m.Kind), File: Intern(m.File()),
			Priority: Intern(m.Priority), Status: events.StatusPending, From: Intern(m.From), SentAt: m.SentAt}
	}
	return effects
}

// agentOf returns the agent whose mail directory holds recipient's
// copies: the task's agent, or the leader.
func (s *State) agentOf(recipient string) string {
	if t := s.Tasks[recipient]; t != nil {
		return t.Agent
	}
	return s.Leader
}

// update applies the status changes the event makes to earlier messages
// (MessageUpdates). The reader's copies of the messages it read,
// acknowledged or rejected are seen, whether the state tracks them or
// not; a question closed by its task leaving waiting was closed by
// transition.
func (s *State) update(e *events.Event, effects []Effect) []Effect {
	if e.Type != events.MessageDelivered && e.Type != events.MessageAcknowledged && e.Type != events.MessageRejected {
		return effects
	}
	// One update at a time, and one DeliveredAt for all the messages the
	// event delivers (it is never written through): an event may name
	// 100,000 messages (crew inbox reading them all).
	var (
		seen      []Copy
		delivered *events.Time
	)
	for u := range messageUpdates(e) {
		if seen == nil {
			seen = make([]Copy, 0, len(e.MessageIDs))
		}
		o, key := s.Lookup(u.ID, Participant(u.Task))
		if o == nil {
			seen = append(seen, Copy{ID: u.ID})
			continue
		}
		seen = append(seen, o.Copy())
		switch u.Status {
		case events.StatusDelivered:
			if o.Status == events.StatusPending {
				if delivered == nil || !delivered.Equal(u.At.Time) {
					at := u.At
					delivered = &at
				}
				o.Status, o.DeliveredAt, o.DeliveredVia = events.StatusDelivered, delivered, Intern(u.Via)
			}
		default: // acknowledged and rejected are final
			delete(s.Open, key)
		}
	}
	if seen == nil {
		return effects
	}
	return append(effects, Effect{Seq: e.Seq, Agent: s.agentOf(e.Task), Seen: seen})
}
