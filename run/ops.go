package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
	"github.com/crew-dev/crew/task"
)

// DefaultNudge is the body of a nudge sent without one (docs/concepts.md, Message kinds).
const DefaultNudge = "Please report your status, blocker, or next step."

// checkBody enforces the rule of docs/files.md, Body limit: valid UTF-8, at most the body limit.
func (r *Run) checkBody(body string) error {
	if !utf8.ValidString(body) {
		return fmt.Errorf("message body is not valid UTF-8; crew stores bodies byte for byte and refuses to alter them: %w", crew.ErrInvalid)
	}
	if max := r.root.maxBody(); len(body) > max {
		return BodyOverLimit("message", int64(len(body)), false, max)
	}
	return nil
}

// EmptyBodyError is a message of Kind (or, with Kind "mail", a mail
// without a subject) refused for an empty or blank body: it wraps
// crew.ErrInvalid. Its words assume no front end; each says how to give
// a body its own way (the command line: an argument, or - for standard
// input).
type EmptyBodyError struct {
	Kind string // a message kind, or "mail"
}

func (e *EmptyBodyError) Error() string {
	if e.Kind == "mail" {
		return "empty mail: give it a body or a subject: " + crew.ErrInvalid.Error()
	}
	return "empty " + e.Kind + ": give it a body (text, not only white space): " + crew.ErrInvalid.Error()
}

// Unwrap returns crew.ErrInvalid.
func (e *EmptyBodyError) Unwrap() error { return crew.ErrInvalid }

// BodyOverLimit is the error of a body of size bytes over the body
// limit max (docs/files.md, Body limit), crew.ErrInvalid; what names the
// body ("message", "mail"). more says that size is a lower bound ("at
// least"): the reader stopped counting there.
func BodyOverLimit(what string, size int64, more bool, max int) error {
	n := fmt.Sprintf("%d bytes", size)
	if more {
		n = "at least " + n
	}
	return fmt.Errorf("%s body is %s, over the limit of %d bytes (--max-body): %w", what, n, max, crew.ErrInvalid)
}

// lineBreaks are the characters that end a line: a title may hold none.
const lineBreaks = "\n\r\v\f\u0085\u2028\u2029"

// checkTitle enforces the rule for a run's or a task's title
// (docs/concepts.md, Identifiers and titles): valid UTF-8, and one line.
// what names it in the message ("run", "task").
func checkTitle(what, title string) error {
	if !utf8.ValidString(title) {
		return fmt.Errorf("%s title is not valid UTF-8; crew refuses to alter it: %w", what, crew.ErrInvalid)
	}
	if strings.ContainsAny(title, lineBreaks) {
		return fmt.Errorf("invalid %s title %q: a title is one line; put the details elsewhere (a message): %w", what, title, crew.ErrInvalid)
	}
	return nil
}

// CheckPriority returns nil for a priority of events.Priorities (low,
// normal, high, urgent) and an error wrapping crew.ErrInvalid otherwise.
func CheckPriority(p string) error {
	if events.PriorityRank(p) < 0 {
		return fmt.Errorf("invalid priority %q: use one of %s: %w", p, strings.Join(events.Priorities, ", "), crew.ErrInvalid)
	}
	return nil
}

// AddTask adds a pending task to the run and creates its agent's mailbox.
// spec.Agent defaults to the task id. A bad id, or a title that is not
// UTF-8 or not one line, is crew.ErrInvalid; an id already used in the
// run (in any letter case) is crew.ErrConflict.
func (r *Run) AddTask(ctx context.Context, id string, spec state.TaskSpec, actor string) (*state.Task, error) {
	if err := crew.ValidateID("task", id); err != nil {
		return nil, err
	}
	if spec.Agent == "" {
		spec.Agent = id
	}
	if err := crew.ValidateID("agent", spec.Agent); err != nil {
		return nil, err
	}
	if crew.SameID(spec.Agent, r.Manifest.Leader) && !crew.SameID(id, Leader) { // (the id leader is refused below, with its own reason)
		return nil, fmt.Errorf("task %s cannot have the leader's name %s as its agent: its mail would land in the leader's mailbox: %w", id, r.Manifest.Leader, crew.ErrInvalid)
	}
	if err := checkTitle("task", spec.Title); err != nil {
		return nil, err
	}
	if !utf8.ValidString(spec.DoneWhen) {
		return nil, fmt.Errorf("task done-when is not valid UTF-8; crew refuses to alter it: %w", crew.ErrInvalid)
	}
	if crew.SameID(id, Leader) || id == events.Broadcast {
		// In any letter case: on a case-insensitive file system a task
		// Leader's wake file and stop count would be the leader's.
		return nil, fmt.Errorf("task id %q is reserved (%s and %s, in any letter case): %w", id, Leader, events.Broadcast, crew.ErrInvalid)
	}
	unlock, err := r.root.lockAgents()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := r.root.leaderNamed(spec.Agent, r.ID()); err != nil {
		return nil, err
	}
	undo, err := r.root.Store.CreateMailbox(spec.Agent)
	if errors.Is(err, crew.ErrConflict) {
		// The mailbox is taken by a case variant; if a task is too, that
		// is the clearer thing to say.
		if st, serr := r.TaskState(); serr == nil {
			if terr := taskTaken(st, id, r.ID()); terr != nil {
				return nil, terr
			}
		}
	}
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var view *state.State
	ev, err := r.commit(ctx, func(st *state.State) (*events.Event, error) {
		if err := taskTaken(st, id, r.ID()); err != nil {
			return nil, err
		}
		view = taskView(st, id)
		return &events.Event{Type: events.TaskCreated, Task: id, Actor: actor, To: string(task.Pending), Data: data}, nil
	})
	if err != nil {
		undo() // a mailbox made for a task that does not exist
		return nil, err
	}
	return taskAfter(view, ev)
}

// Mailboxes are shared across runs (docs/concepts.md, Reserved names), so
// an agent is a leader or a task's agent in the whole state root, never
// both: the leader's mail (questions, reports) and a worker's (responses,
// steers) must not land in one mailbox, whichever runs they belong to.

// lockAgents takes the store's lock for that rule (store.Store.LockAgents)
// until what is created is committed, so that a run create and a task
// add with clashing names cannot both pass the check.
func (r *Root) lockAgents() (unlock func(), err error) { return r.Store.LockAgents() }

// leaderNamed returns crew.ErrConflict if agent is, in any letter case,
// the leader of a run other than except.
func (r *Root) leaderNamed(agent, except string) error {
	ids, err := r.Store.Runs(context.Background())
	if err != nil {
		return err
	}
	for _, id := range ids {
		if id == except {
			continue
		}
		l, err := r.Store.Open(context.Background(), id)
		if err != nil {
			continue // a run that cannot be opened has no mail delivered
		}
		if leader := l.Manifest().Leader; crew.SameID(leader, agent) {
			return fmt.Errorf("agent %s is the leader of run %s; a task's agent may not share a mailbox with a leader of any run: give the task another --agent: %w", agent, id, crew.ErrConflict)
		}
	}
	return nil
}

// taskAgentNamed returns crew.ErrConflict if agent is, in any letter
// case, the agent of a task of any run.
func (r *Root) taskAgentNamed(agent string) error {
	ids, err := r.Store.Runs(context.Background())
	if err != nil {
		return err
	}
	for _, id := range ids {
		run, err := r.Open(id)
		if err != nil {
			continue
		}
		st, err := run.TaskState()
		if err != nil && st == nil {
			continue
		}
		for _, t := range st.TaskList() {
			if crew.SameID(t.Agent, agent) {
				return fmt.Errorf("agent %s works on task %s in run %s; a run's leader may not share a mailbox with a task's agent of any run: choose another --leader: %w", agent, t.ID, id, crew.ErrConflict)
			}
		}
	}
	return nil
}

// taskTaken returns crew.Taken when run's state st has a task called id
// in any letter case, else nil.
func taskTaken(st *state.State, id, run string) error {
	for _, t := range st.Tasks {
		if crew.SameID(t.ID, id) {
			return crew.Taken("task", id, t.ID, " in run "+run)
		}
	}
	return nil
}

// taskView is a state that holds only st's task id (a copy; none when st
// has none), for taskAfter: what a commit's validation saw of the task.
func taskView(st *state.State, id string) *state.State {
	v := state.NewTasks()
	v.Run, v.Leader, v.Seq, v.Offset = st.Run, st.Leader, st.Seq, st.Offset
	if t := st.Tasks[id]; t != nil {
		v.Tasks[id] = t.Copy()
	}
	return v
}

// taskAfter is the task ev's commit left: ev applied to view, the task as
// the commit's validation saw it (taskView). It is the operation's own
// result, as of its event, and costs no read of the run: reading the
// run's state again here cost a decode of the whole snapshot, which grows
// with the number of tasks.
func taskAfter(view *state.State, ev *events.Event) (*state.Task, error) {
	if _, err := view.Apply(ev); err != nil {
		return nil, err
	}
	t := view.Tasks[ev.Task]
	if t == nil {
		return nil, fmt.Errorf("task %s vanished: %w", ev.Task, crew.ErrNotFound)
	}
	return t, nil
}

var opEvents = map[task.Op]string{
	task.Start:    events.TaskStarted,
	task.Complete: events.TaskCompleted,
	task.Fail:     events.TaskFailed,
	task.Cancel:   events.TaskCancelled,
	task.Retry:    events.TaskRetried,
}

// Transition moves a task with one of start, complete, fail, cancel or
// retry (docs/state-machine.md). reason is recorded for fail and cancel; data, when not
// nil, is stored in the event (the done-when result of complete). A
// task.failed carries a failure message to the leader, with the reason
// (notice.go), open until the leader acknowledges it. A refused
// transition is a *task.TransitionError (crew.ErrConflict); an unknown task
// is crew.ErrNotFound.
func (r *Run) Transition(ctx context.Context, id string, op task.Op, actor, reason string, data json.RawMessage) (*state.Task, error) {
	return r.transition(ctx, id, op, actor, reason, data, nil, nil)
}

// transition is Transition with one more rule: allowed, when not nil,
// may refuse the transition too, seeing the task in a state that tracks
// its open messages: view, a state.For(id) the caller read (store.Change).
func (r *Run) transition(ctx context.Context, id string, op task.Op, actor, reason string, data json.RawMessage,
	view *state.State, allowed func(*state.State, *state.Task) error) (*state.Task, error) {
	typ, ok := opEvents[op]
	if !ok {
		return nil, fmt.Errorf("operation %s is not a plain transition: %w", op, crew.ErrInvalid)
	}
	if !utf8.ValidString(reason) {
		return nil, fmt.Errorf("reason is not valid UTF-8: %w", crew.ErrInvalid)
	}
	var (
		noticeID string
		after    *state.State // the task as validated (taskView)
	)
	if op == task.Fail {
		var err error
		if noticeID, err = newNoticeID(); err != nil {
			return nil, err
		}
	}
	ev, err := r.log.Commit(ctx, store.Change{State: view, Validate: func(st *state.State) (*events.Event, error) {
		t, err := st.Task(id)
		if err != nil {
			return nil, err
		}
		next, err := task.Next(t.ID, t.Status, op)
		if err != nil {
			return nil, err
		}
		if allowed != nil {
			if err := allowed(st, t); err != nil {
				return nil, err
			}
		}
		ev := &events.Event{Type: typ, Task: t.ID, Actor: actor, From: string(t.Status), To: string(next), Reason: reason, Data: data}
		if op == task.Fail {
			ev.Message = failureNotice(noticeID, st, t, reason) // the leader is told (notice.go)
		}
		after = taskView(st, t.ID)
		return ev, nil
	}})
	if err != nil {
		return nil, err
	}
	return taskAfter(after, ev)
}

// SendOptions are the parts of a message its sender chooses.
type SendOptions struct {
	Kind     string // question, response, steer, follow-up, nudge, report, message
	Task     string // the worker's task: recipient (leader to worker) or sender (worker to leader); "*" for a broadcast
	From     string // sending agent
	Body     string
	Priority string // one of events.Priorities; "" means events.DefaultPriority
	ReplyTo  string
	// Ask, for a question, is its deadline and default answer
	// (state.Ask), stored in the question: Await honours it.
	Ask *state.Ask
}

// Send sends a message and returns it as stored (with its seq and id).
// Its kind's rules are events.KindOf's (docs/state-machine.md): the
// direction and recipient (the leader for an outbox kind, the task for
// an inbox kind, every task not yet ended for a broadcast, whose Task is
// "*"), the transition a question or a response makes its task (and a
// response answers the open question), and refusal for a task that has
// ended for the kinds without one.
//
// Errors: crew.ErrInvalid for a bad body or priority or a kind crew
// writes itself (failure, timeout: events.SenderCrew), crew.ErrNotFound for
// an unknown task, crew.ErrConflict (a *task.TransitionError for question
// and response) when the task's state does not allow it; a response to a
// running task whose last question was answered (or timed out) says by
// whom and when instead (answeredAlready).
func (r *Run) Send(ctx context.Context, o SendOptions) (*events.Message, error) {
	kind, ok := events.KindOf(o.Kind)
	if !ok {
		return nil, fmt.Errorf("unknown message kind %q: %w", o.Kind, crew.ErrInvalid)
	}
	if kind.Sender == events.SenderCrew {
		return nil, fmt.Errorf("a %s message is not sent: crew writes it to the leader when a task fails or a question times out: %w", o.Kind, crew.ErrInvalid)
	}
	if o.Priority == "" {
		o.Priority = events.DefaultPriority
	}
	if err := CheckPriority(o.Priority); err != nil {
		return nil, err
	}
	if o.Kind == events.KindNudge && o.Body == "" {
		o.Body = DefaultNudge
	}
	if err := r.checkBody(o.Body); err != nil {
		return nil, err
	}
	if strings.TrimSpace(o.Body) == "" {
		return nil, &EmptyBodyError{Kind: o.Kind}
	}
	var data json.RawMessage
	if o.Ask != nil {
		if err := r.checkAsk(o); err != nil {
			return nil, err
		}
		data = state.AskData(*o.Ask)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	ev, err := r.commit(ctx, func(st *state.State) (*events.Event, error) {
		m := &events.Message{ID: id.String(), Kind: o.Kind, Direction: kind.Direction, From: o.From, Body: o.Body, Priority: o.Priority, ReplyTo: o.ReplyTo, Data: data}
		ev := &events.Event{Type: kind.Event, Actor: o.From, Message: m}
		if kind.Broadcast {
			var recipients []string
			for _, t := range st.TaskList() {
				if !t.Status.Terminal() {
					recipients = append(recipients, t.ID)
				}
			}
			if len(recipients) == 0 {
				return nil, fmt.Errorf("broadcast: run %s has no task that is still open: %w", r.ID(), crew.ErrConflict)
			}
			ev.Data = state.BroadcastData(recipients)
			m.Task, m.To = events.Broadcast, events.Broadcast
			return ev, nil
		}
		t, err := st.Task(o.Task)
		if err != nil {
			return nil, err
		}
		ev.Task, m.Task, m.To = t.ID, t.ID, t.ID
		if kind.Direction == events.Outbox {
			m.To = st.Leader
		}
		if kind.Op != "" {
			next, err := task.Next(t.ID, t.Status, kind.Op)
			if err != nil {
				return nil, err
			}
			if kind.Op == task.Respond {
				m.ReplyTo = t.Question
			}
			ev.From, ev.To = string(t.Status), string(next)
		} else if t.Status.Terminal() {
			hint := ""
			if t.Status != task.Completed {
				hint = fmt.Sprintf(" (crew task retry %s reopens it)", t.ID)
			}
			return nil, fmt.Errorf("task %s is %s; a %s cannot reach it now%s: %w", t.ID, t.Status, o.Kind, hint, crew.ErrConflict)
		}
		return ev, nil
	})
	var te *task.TransitionError
	if kind.Op == task.Respond && errors.As(err, &te) && te.State == task.Running {
		return nil, r.answeredAlready(te)
	}
	if err != nil {
		return nil, err
	}
	return ev.Message, nil
}

// answeredAlready explains a response refused because the task is
// running (te): if its last question was answered, by whom and when, or
// that it timed out; the leader that lost a respond race learns who won.
// The event is the one at the task's ClosedSeq (the whole log is read
// only for a tasks.json written before it was kept). A task that never
// asked keeps te.
func (r *Run) answeredAlready(te *task.TransitionError) error {
	st, err := r.TaskState()
	if err != nil || st.Tasks[te.Task] == nil || st.Tasks[te.Task].Questions == 0 {
		return te
	}
	var last *events.Event
	from := max(st.Tasks[te.Task].ClosedSeq-1, 0)
	r.scan(from, func(e *events.Event) error {
		if e.Task == te.Task && (e.Type == events.TaskResponded || e.Type == events.TaskAskTimedOut) {
			ev := *e
			last = &ev
			if from > 0 {
				return events.ErrStopScan
			}
		}
		return nil
	})
	if last == nil {
		return te
	}
	what := "timed out unanswered"
	question := ""
	if len(last.MessageIDs) > 0 {
		question = last.MessageIDs[0]
	}
	if last.Type == events.TaskResponded {
		what = "was answered already, by " + last.Actor
		if last.Message != nil {
			question = last.Message.ReplyTo
		}
	}
	return fmt.Errorf("task %s is running, not waiting: its question %s %s at %s (seq %d); to add to the answer use follow-up or steer: %w",
		te.Task, question, what, last.At, last.Seq, crew.ErrConflict)
}

// AskTimedOut records that the worker waiting on question gave up: the
// task goes back from waiting to running (task.ask_timed_out), the
// question is closed (rejected) and the leader is told, by a timeout
// message open until it acknowledges it (notice.go), which quotes the
// question. If the question was answered meanwhile, it returns the
// response and writes nothing.
func (r *Run) AskTimedOut(ctx context.Context, taskID, questionID, actor string) (*events.Message, error) {
	q, _ := r.FindMessage(questionID) // (not found: the notice names its id only; the commit checks it)
	return r.askTimedOut(ctx, taskID, questionID, q, actor, nil)
}

// checkAsk checks the deadline and default answer of question o: only
// for a question, a deadline that is set, a default that is a valid
// body and not blank.
func (r *Run) checkAsk(o SendOptions) error {
	if o.Kind != events.KindQuestion || o.Ask.Deadline.IsZero() {
		return fmt.Errorf("a deadline is for a question, and must be set: %w", crew.ErrInvalid)
	}
	if d := o.Ask.Default; d != nil {
		if err := r.checkBody(*d); err != nil {
			return fmt.Errorf("default answer: %w", err)
		}
		if strings.TrimSpace(*d) == "" {
			return fmt.Errorf("empty default answer: %w", crew.ErrInvalid)
		}
	}
	return nil
}

// askTimedOut is AskTimedOut for question questionID (q, when not nil,
// is the question: the notice quotes it); with def, the question is
// answered by default: the event records def (state.TimedOutData), and
// the question stays open for the leader to see (state.MessageUpdates),
// so no notice is written.
func (r *Run) askTimedOut(ctx context.Context, taskID, questionID string, q *events.Message, actor string, def *string) (*events.Message, error) {
	var answered bool
	noticeID, err := newNoticeID()
	if err != nil {
		return nil, err
	}
	_, err = r.commit(ctx, func(st *state.State) (*events.Event, error) {
		t, err := st.Task(taskID)
		if err != nil {
			return nil, err
		}
		if t.Status != task.Waiting || t.Question != questionID {
			answered = true
			return nil, nil
		}
		next, err := task.Next(t.ID, t.Status, task.AskTimeout)
		if err != nil {
			return nil, err
		}
		ev := &events.Event{Type: events.TaskAskTimedOut, Task: t.ID, Actor: actor, From: string(t.Status), To: string(next),
			Reason: "no response before the timeout", MessageIDs: []string{questionID}}
		if def != nil {
			ev.Reason, ev.Data = AnsweredByDefault, state.TimedOutData(*def)
		} else {
			ev.Message = timeoutNotice(noticeID, st, t, questionID, q)
		}
		return ev, nil
	})
	if err != nil {
		return nil, err
	}
	if answered || def != nil {
		return r.answer(questionID, taskID, 0)
	}
	return nil, nil
}

// AnsweredByDefault is the reason of a task.ask_timed_out event that
// answered its question with the default the question carried.
const AnsweredByDefault = "no response before the deadline: answered by default"

// defaultAnswer is the response Await returns for question questionID answered
// by default by event e: not a message of the log (its id is ""), from
// crew, with the default as its body and AnsweredByDefault as its
// reason.
func defaultAnswer(e *events.Event, questionID, def string) *events.Message {
	return &events.Message{Seq: e.Seq, Run: e.Run, Task: e.Task, Kind: events.KindResponse, Direction: events.Inbox,
		From: state.CrewActor, To: e.Task, Body: def, Priority: events.DefaultPriority, Status: events.StatusAcknowledged, SentAt: e.At,
		Reason: AnsweredByDefault, ReplyTo: questionID}
}
