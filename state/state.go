package state

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/task"
)

// Leader is the participant name readers use for the leader's view: the
// messages workers send (questions and reports) are the leader's.
const Leader = "leader"

// Manifest is a run's metadata: the Data of its run.created event, and
// the run directory's manifest.json on the file store
// (docs/files.md, Layout).
type Manifest struct {
	ID        string      `json:"id"`
	Title     string      `json:"title,omitempty"`
	Leader    string      `json:"leader"`
	CreatedAt events.Time `json:"createdAt"`
	Dir       string      `json:"dir"` // working directory the run was created from; done-when commands run here
}

// TaskSpec is the Data of a task.created event.
type TaskSpec struct {
	Title    string `json:"title,omitempty"`
	Agent    string `json:"agent"`
	DoneWhen string `json:"doneWhen,omitempty"`
}

// Task is the current state of one task, reduced from the log. In --json
// output it is {"id","title","agent","status","createdAt","updatedAt",...}.
type Task struct {
	ID        string       `json:"id"`
	Title     string       `json:"title"` // always present, "" when none: part of the --json shape (docs/cli.md)
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
	// ClosedSeq is the seq of the event that closed its last question
	// (task.responded, task.ask_timed_out, or the task ending): where a
	// refused response finds who answered, without reading the log.
	ClosedSeq   int64       `json:"closedSeq,omitempty"`
	Questions   int         `json:"questions"`   // questions asked so far
	Attempts    int         `json:"attempts"`    // times started
	LastEventAt events.Time `json:"lastEventAt"` // last event about this task: a quiet worker's cue for nudge
	// LastSeenAt is the last event about this task that its worker wrote
	// (a sign of life, signOfLife); nil before the first.
	LastSeenAt *events.Time `json:"lastSeenAt,omitempty"`
	// NudgedAt is when the task was last nudged.
	NudgedAt *events.Time `json:"nudgedAt,omitempty"`
	// Workers are the attempts of its supervised worker processes (crew
	// spawn), oldest first.
	Workers    []Worker `json:"workers,omitempty"`
	CreatedSeq int64    `json:"createdSeq"` // seq of its task.created event: the order tasks were added in

	owner uint64 // the State.owner that may change it in place (State.own)
}

// Open is a message not yet acknowledged or rejected, as tracked in the
// state: enough to list, filter and order it without reading its body.
type Open struct {
	ID          string       `json:"id"`
	Seq         int64        `json:"seq"`
	Task        string       `json:"task"`     // recipient task, or "" for the leader (RecipientKey)
	Kind        string       `json:"kind"`     // message kind
	File        string       `json:"file"`     // mailbox file: inbox, outbox, steering
	Priority    string       `json:"priority"` // low … urgent
	Status      string       `json:"status"`   // pending or delivered
	DeliveredAt *events.Time `json:"deliveredAt,omitempty"`
	// DeliveredVia is how it was delivered (events.Event.Via).
	DeliveredVia string      `json:"deliveredVia,omitempty"`
	From         string      `json:"from"`   // sender
	SentAt       events.Time `json:"sentAt"` // with From and ID, names the mail-tree copy (mailbox.Name)
}

// Copy returns the name parts of the message's mail-tree copy.
func (o *Open) Copy() Copy { return Copy{ID: o.ID, From: o.From, SentAt: o.SentAt} }

// State is a run reduced from its log up to Seq: the tasks and the open
// messages. Offset is the byte length of the file log it reflects (0 on
// a store without files), so a reader resumes replay there. On the file
// store tasks.json holds it without Open, which can be large (every
// message not yet acknowledged), and open.jsonl holds it whole
// (docs/files.md, Snapshots).
type State struct {
	Seq    int64            `json:"seq"`
	Offset int64            `json:"offset"`
	Run    string           `json:"run,omitempty"` // the run's id, from run.created (errors name it)
	Leader string           `json:"leader"`
	Tasks  map[string]*Task `json:"tasks"`
	// Open is keyed by Key: a message id, or id@task for a broadcast's
	// copy. It is nil in a state that tracks tasks only (NewTasks), and
	// holds one participant's messages only in a state made by For.
	Open   map[string]*Open `json:"-"`
	Damage []string         `json:"damage,omitempty"` // damage met while reducing the log; readers exit 7
	// Files is the seq of the last message of each mailbox file, by
	// events.Message.File ("inbox", "outbox", "steering"): the line each
	// mailbox projection must end with.
	Files map[string]int64 `json:"files"`

	only    string // with onlySet: the recipient key whose messages Open tracks
	onlySet bool
	// owner says which of its tasks Apply may change in place: those
	// whose owner is the same. ShareTasks shares the tasks between the
	// state and its copy and gives each a new owner, so that neither
	// changes a task the other holds: Apply copies it first (own).
	owner uint64
}

// owners hands out State.owner values: each new one is unique.
var owners atomic.Uint64

// New returns an empty state that tracks every open message.
func New() *State {
	return &State{Tasks: map[string]*Task{}, Open: map[string]*Open{}, Files: map[string]int64{}}
}

// NewTasks returns an empty state that tracks tasks only (Open is nil).
func NewTasks() *State {
	s := New()
	s.Open = nil
	return s
}

// For returns an empty state that tracks the open messages of one
// participant only (a task id, or Leader). For a task id it holds that
// task only, too (OneTask): what a worker reads needs no other, and a
// run of 1,000 tasks is then not decoded whole by every worker's hook.
func For(participant string) *State {
	s := New()
	s.only, s.onlySet = RecipientKey(participant), true
	return s
}

// Fresh returns an empty state that tracks what s tracks.
func (s *State) Fresh() *State {
	f := New()
	if s.Open == nil {
		f.Open = nil
	}
	f.only, f.onlySet = s.only, s.onlySet
	return f
}

// Tracks reports whether the state keeps the open messages of recipient
// (a task id, or "" for the leader).
func (s *State) Tracks(recipient string) bool {
	return s.Open != nil && (!s.onlySet || s.only == recipient)
}

// Whole reports whether the state tracks every open message of the run.
func (s *State) Whole() bool { return s.Open != nil && !s.onlySet }

// Only returns the recipient key (RecipientKey) whose open messages a
// state made by For tracks, and true; "" and false for any other state.
func (s *State) Only() (recipient string, ok bool) {
	return s.only, s.Open != nil && s.onlySet
}

// OneTask returns the task a state made by For(task id) holds, and
// true: its Tasks holds that task only (if the run has it), and Apply
// leaves the other tasks out. For any other state it returns "" and
// false. An id missing from such a state may still be a task of the
// run: Task's error then names no near id.
func (s *State) OneTask() (id string, ok bool) {
	return s.only, s.onlySet && s.only != ""
}

// RecipientKey is how State.Open names a participant: its task id, or ""
// for Leader.
func RecipientKey(participant string) string {
	if participant == Leader {
		return ""
	}
	return participant
}

// Participant is the inverse of RecipientKey.
func Participant(recipient string) string {
	if recipient == "" {
		return Leader
	}
	return recipient
}

// Key is the key of a message's recipient copy in State.Open: the
// message id, or id@task for the copy of a broadcast (to is
// events.Broadcast) that task received.
func Key(id, to, recipient string) string {
	if to == events.Broadcast {
		var buf [128]byte
		return string(appendCopyKey(buf[:0], id, recipient))
	}
	return id
}

// appendCopyKey appends the key of the copy of broadcast id that
// recipient received (Key) to b.
func appendCopyKey(b []byte, id, recipient string) []byte {
	return append(append(append(b, id...), '@'), recipient...)
}

// Lookup returns the open entry of message id for participant (a task
// id, or Leader): its own copy of a broadcast, or the message itself.
// Its key is returned with it; nil when the message is not open.
func (s *State) Lookup(id, participant string) (*Open, string) {
	// The broadcast copy's key (Key) is looked up from a buffer on the
	// stack, made a string only when found: marking a reader's 100,000
	// messages delivered looks each up.
	var buf [128]byte
	k := appendCopyKey(buf[:0], id, participant)
	if o := s.Open[string(k)]; o != nil {
		return o, string(k)
	}
	return s.Open[id], id
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

// Task returns the task with the given id. An unknown id is a
// *NoTaskError (wrapping crew.ErrNotFound), naming the run (the run a
// command acts in is often implicit: CREW_RUN, or the latest) and the id
// it most likely meant when the run has one (crew.NearID: a case
// variant, a near name).
func (s *State) Task(id string) (*Task, error) {
	if t := s.Tasks[id]; t != nil {
		return t, nil
	}
	ids := make([]string, 0, len(s.Tasks))
	for tid := range s.Tasks {
		ids = append(ids, tid)
	}
	return nil, &NoTaskError{ID: id, Run: s.Run, Near: crew.NearID(id, ids)}
}

// NoTaskError is a task id that a run does not hold: ID in run Run
// ("" when unknown), Near the id it most likely meant ("" for none).
// Hint, when set, is said after the rest (app says there which run was
// taken, and which other run holds the task). It wraps crew.ErrNotFound.
type NoTaskError struct {
	ID, Run, Near, Hint string
}

func (e *NoTaskError) Error() string {
	in := "this run"
	if e.Run != "" {
		in = "run " + e.Run
	}
	msg := fmt.Sprintf("no task %s in %s", e.ID, in)
	if e.Near != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", e.Near)
	} else {
		msg += " (crew task list shows the tasks)"
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg + ": " + crew.ErrNotFound.Error()
}

// Unwrap returns crew.ErrNotFound.
func (e *NoTaskError) Unwrap() error { return crew.ErrNotFound }

// OpenFor returns the open messages of one participant (a task id, or
// Leader), ordered by seq.
func (s *State) OpenFor(participant string) []*Open {
	want := RecipientKey(participant)
	var out []*Open
	for _, o := range s.Open {
		if o.Task == want {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// Err returns the damage the state met while reducing the log as an error
// wrapping crew.ErrDamaged (exit 7), or nil when it read everything.
func (s *State) Err() error {
	if len(s.Damage) == 0 {
		return nil
	}
	// A log full of garbage has a damaged place per line: name the first
	// few, count the rest (the message is printed on one line).
	const shown = 10
	if n := len(s.Damage); n > shown {
		return fmt.Errorf("%s; and %s; run crew repair: %w", strings.Join(s.Damage[:shown], "; "), human.Count(n-shown, "more damaged place"), crew.ErrDamaged)
	}
	return fmt.Errorf("%s; run crew repair: %w", strings.Join(s.Damage, "; "), crew.ErrDamaged)
}

// CopyTasks returns a copy of s without its open messages: the tasks
// are copied one by one, so that a caller may change them (Apply changes
// them in place; the times they point to it only replaces).
func (s *State) CopyTasks() *State {
	c := s.withoutOpen()
	for id, t := range c.Tasks {
		c.Tasks[id] = t.Copy()
	}
	return c
}

// ShareTasks returns a copy of s without its open messages whose tasks
// are s's own, shared copy-on-write: Apply copies a task before it first
// changes it in either (own). Nothing else may change them; it is for a
// state that is only read, such as the one a commit's projection job
// writes to tasks.json, where a copy of every task (CopyTasks) was 6 %
// of a crew steer's CPU at 1,000 tasks. The caller must be the only one
// using s meanwhile, as for Apply.
func (s *State) ShareTasks() *State {
	c := s.withoutOpen()
	s.owner, c.owner = owners.Add(1), owners.Add(1)
	return c
}

// withoutOpen returns a copy of s without its open messages, whose task
// map holds s's tasks.
func (s *State) withoutOpen() *State {
	c := *s
	c.Open = nil
	c.Tasks = maps.Clone(s.Tasks)
	if c.Tasks == nil {
		c.Tasks = map[string]*Task{}
	}
	c.Files = maps.Clone(s.Files)
	c.Damage = append([]string(nil), s.Damage...)
	return &c
}

// own returns task id of s for Apply to change (nil if s has none): a
// copy of it, made once, when s may share it with a copy of s
// (ShareTasks).
func (s *State) own(id string) *Task {
	t := s.Tasks[id]
	if t == nil || t.owner == s.owner {
		return t
	}
	t = t.Copy()
	t.owner = s.owner
	s.Tasks[id] = t
	return t
}

// Copy returns a copy of t that Apply may change without changing t:
// its workers are copied too (the times it points to Apply only
// replaces).
func (t *Task) Copy() *Task {
	c := *t
	c.Workers = slices.Clone(t.Workers)
	return &c
}

// Copy returns a copy of the whole state, open messages included.
func (s *State) Copy() *State {
	c := s.CopyTasks()
	if s.Open != nil {
		c.Open = make(map[string]*Open, len(s.Open))
		for k, o := range s.Open {
			oc := *o
			c.Open[k] = &oc
		}
	}
	return c
}

var (
	internMu sync.Mutex
	interned = map[string]string{}
)

// Intern returns one shared copy of a short string that many open
// entries hold (kinds, files, priorities, agent names), so that a state
// with many open messages does not hold as many copies. Strings longer
// than an id are returned as they are.
func Intern(s string) string {
	if len(s) > 64 {
		return s
	}
	internMu.Lock()
	defer internMu.Unlock()
	if v, ok := interned[s]; ok {
		return v
	}
	if len(interned) < 4096 {
		interned[s] = s
	}
	return s
}

// Current gives the stored message m (status pending, as every stored
// message has) the status of its open entry o, and a broadcast the
// recipient of o, as readers show it. It returns m.
func (o *Open) Current(m *events.Message) *events.Message {
	m.Status, m.DeliveredAt, m.DeliveredVia = o.Status, o.DeliveredAt, o.DeliveredVia
	if m.To == events.Broadcast {
		m.To = o.Task
	}
	return m
}
