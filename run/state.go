package run

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/task"
)

// Task is the current state of one task, reduced from the log. In --json
// output it is {"id","title","agent","status","createdAt","updatedAt",...}.
type Task struct {
	ID        string       `json:"id"`
	Title     string       `json:"title"` // always present, "" when none: part of the --json shape (SPEC §6)
	Agent     string       `json:"agent"`
	Status    task.State   `json:"status"`
	CreatedAt events.Time  `json:"createdAt"`
	UpdatedAt events.Time  `json:"updatedAt"`
	StartedAt *events.Time `json:"startedAt,omitempty"`
	EndedAt   *events.Time `json:"endedAt,omitempty"`
	DoneWhen  string       `json:"doneWhen,omitempty"`
	Reason    string       `json:"reason,omitempty"`   // why it failed or was cancelled
	Question  string       `json:"question,omitempty"` // id of the open question while waiting
	// QuestionFrom and QuestionAt are the sender and time of the open
	// question: with its id they name its mail-tree copy (mailbox.Name),
	// whose read flag the response sets.
	QuestionFrom string       `json:"questionFrom,omitempty"`
	QuestionAt   *events.Time `json:"questionAt,omitempty"`
	Questions    int          `json:"questions"`   // questions asked so far
	Attempts     int          `json:"attempts"`    // times started
	LastEventAt  events.Time  `json:"lastEventAt"` // last event about this task: a quiet worker's cue for nudge
	CreatedSeq   int64        `json:"createdSeq"`  // seq of its task.created event: the order tasks were added in
}

// TaskSpec is the Data of a task.created event.
type TaskSpec struct {
	Title    string `json:"title,omitempty"`
	Agent    string `json:"agent"`
	DoneWhen string `json:"doneWhen,omitempty"`
}

// Open is a message not yet acknowledged or rejected, as tracked in the
// state: enough to list, filter and order it without reading its body.
type Open struct {
	ID          string       `json:"id"`
	Seq         int64        `json:"seq"`
	Task        string       `json:"task"`     // recipient task, or "" for the leader
	Kind        string       `json:"kind"`     // message kind
	File        string       `json:"file"`     // mailbox file: inbox, outbox, steering
	Priority    string       `json:"priority"` // low … urgent
	Status      string       `json:"status"`   // pending or delivered
	DeliveredAt *events.Time `json:"deliveredAt,omitempty"`
	From        string       `json:"from"`   // sender
	SentAt      events.Time  `json:"sentAt"` // with From and ID, names the mail-tree copy (mailbox.Name)
}

// mailName is the name of the message's mail-tree copies (mailbox.Name).
func (o *Open) mailName() string { return mailName(o.SentAt, o.From, o.ID) }

// State is a run reduced from its log up to Seq: the tasks and the open
// messages. Offset is the byte length of the log it reflects, so a reader
// resumes replay there. tasks.json holds it without Open, which can be
// large (every message not yet acknowledged); open.jsonl holds it whole,
// and is written less often (see openDue).
type State struct {
	Seq    int64            `json:"seq"`
	Offset int64            `json:"offset"`
	Leader string           `json:"leader"`
	Tasks  map[string]*Task `json:"tasks"`
	// Open is keyed by message id, or id@task for a broadcast's copy. It
	// is nil in a state read for its tasks only (Run.TaskState), and
	// holds one participant's messages only in a state read for one
	// reader (on the file store: a run in a RemoteStore always has the
	// whole state at hand, and gives every reader all of it).
	Open   map[string]*Open `json:"-"`
	Damage []string         `json:"damage,omitempty"` // damage met while reducing the log; readers exit 7
	// Files is the seq of the last message of each mailbox file, by
	// events.Message.File ("inbox", "outbox", "steering"): the line each
	// mailbox projection must end with.
	Files map[string]int64 `json:"files"`

	only    string // with onlySet: the participant (recipient key) whose messages Open tracks
	onlySet bool
	// acts, when not nil, collects what apply finds the mail tree must
	// show: copies to deliver and read flags to set (see projection).
	acts *[]treeAct
}

// tracks reports whether the state keeps the open message of recipient
// (a task id, or "" for the leader).
func (s *State) tracks(recipient string) bool {
	return s.Open != nil && (!s.onlySet || s.only == recipient)
}

func newState() *State {
	return &State{Tasks: map[string]*Task{}, Open: map[string]*Open{}, Files: map[string]int64{}}
}

// TaskList returns the tasks ordered by creation (seq of task.created).
func (s *State) TaskList() []*Task {
	ts := make([]*Task, 0, len(s.Tasks))
	for _, t := range s.Tasks {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].CreatedSeq > 0 && ts[j].CreatedSeq > 0 {
			return ts[i].CreatedSeq < ts[j].CreatedSeq
		}
		// A snapshot written before CreatedSeq existed: the time, in ms.
		if !ts[i].CreatedAt.Equal(ts[j].CreatedAt.Time) {
			return ts[i].CreatedAt.Before(ts[j].CreatedAt.Time)
		}
		return ts[i].ID < ts[j].ID
	})
	return ts
}

// openKey is the key of a message's recipient copy in State.Open: a
// broadcast has one copy per recipient task.
func openKey(id, to, recipient string) string {
	if to == events.Broadcast {
		return id + "@" + recipient
	}
	return id
}

// broadcastData is the Data of a broadcast's message.sent event: the tasks
// it went to (every non-terminal task when it was sent).
type broadcastData struct {
	Recipients []string `json:"recipients"`
}

// apply folds one event into the state. It trusts the event: validation
// happens before an event is written.
func (s *State) apply(e *events.Event) error {
	s.Seq = e.Seq
	t := s.Tasks[e.Task]
	if t != nil {
		t.LastEventAt = e.At
	}
	switch e.Type {
	case events.RunCreated:
		var m Manifest
		if err := json.Unmarshal(e.Data, &m); err != nil {
			return fmt.Errorf("seq %d: bad run.created: %w", e.Seq, err)
		}
		s.Leader = m.Leader
		return nil
	case events.TaskCreated:
		var spec TaskSpec
		if err := json.Unmarshal(e.Data, &spec); err != nil {
			return fmt.Errorf("seq %d: bad task.created: %w", e.Seq, err)
		}
		s.Tasks[e.Task] = &Task{ID: e.Task, Title: spec.Title, Agent: spec.Agent, DoneWhen: spec.DoneWhen,
			Status: task.Pending, CreatedAt: e.At, UpdatedAt: e.At, LastEventAt: e.At, CreatedSeq: e.Seq}
		return nil
	}
	if e.To != "" && t != nil {
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
		case task.Pending:
			t.Reason, t.EndedAt = "", nil // retried: it has not ended now
		}
		if t.Question != "" && t.Status != task.Waiting {
			// The question is answered, timed out or moot: close it.
			if e.Type == events.TaskResponded && s.acts != nil && t.QuestionAt != nil {
				// The leader has read it: it answered it.
				*s.acts = append(*s.acts, treeAct{seq: e.Seq, agent: s.Leader, ids: []string{t.Question}, name: mailName(*t.QuestionAt, t.QuestionFrom, t.Question)})
			}
			delete(s.Open, t.Question)
			t.Question, t.QuestionFrom, t.QuestionAt = "", "", nil
		}
	}
	if m := e.Message; m != nil {
		s.Files[m.File()] = m.Seq
		open := func(key, recipient string) {
			if s.acts != nil {
				agent := s.Leader
				if rt := s.Tasks[recipient]; rt != nil {
					agent = rt.Agent
				}
				*s.acts = append(*s.acts, treeAct{seq: e.Seq, agent: agent, deliver: m})
			}
			if s.tracks(recipient) {
				s.Open[key] = &Open{ID: m.ID, Seq: m.Seq, Task: recipient, Kind: intern(m.Kind), File: intern(m.File()),
					Priority: intern(m.Priority), Status: events.StatusPending, From: intern(m.From), SentAt: m.SentAt}
			}
		}
		switch m.To {
		case events.Broadcast:
			var d broadcastData
			json.Unmarshal(e.Data, &d)
			for _, r := range d.Recipients {
				open(openKey(m.ID, m.To, r), r)
			}
		default:
			recipient := m.To
			if m.Direction == events.Outbox {
				recipient = ""
			}
			open(m.ID, recipient)
		}
		if m.Kind == events.KindQuestion && t != nil {
			at := m.SentAt
			t.Question, t.QuestionFrom, t.QuestionAt = m.ID, m.From, &at
			t.Questions++
		}
	}
	var seen *treeAct
	if s.acts != nil && len(e.MessageIDs) > 0 && (e.Type == events.MessageDelivered || e.Type == events.MessageAcknowledged || e.Type == events.MessageRejected) {
		// Acknowledged and rejected both come after delivered: seen.
		agent := s.Leader
		if rt := s.Tasks[e.Task]; rt != nil {
			agent = rt.Agent
		}
		*s.acts = append(*s.acts, treeAct{seq: e.Seq, agent: agent, ids: e.MessageIDs})
		seen = &(*s.acts)[len(*s.acts)-1]
		if s.Open != nil {
			seen.refs = make([]*Open, len(e.MessageIDs))
		}
	}
	for k, id := range e.MessageIDs {
		key := id
		if _, ok := s.Open[id+"@"+e.Task]; ok {
			key = id + "@" + e.Task // the reader's copy of a broadcast
		}
		o := s.Open[key]
		if seen != nil && seen.refs != nil {
			seen.refs[k] = o
		}
		if o == nil {
			continue
		}
		switch e.Type {
		case events.MessageDelivered:
			if o.Status == events.StatusPending {
				at := e.At
				o.Status, o.DeliveredAt = events.StatusDelivered, &at
			}
		case events.MessageAcknowledged, events.MessageRejected:
			delete(s.Open, key)
		}
	}
	return nil
}
