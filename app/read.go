package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
	"github.com/crew-dev/crew/supervise"
)

// Read is the request of Inbox (a worker's messages) and Outbox (what
// workers sent the leader).
type Read struct {
	Run    string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Since  int64  `json:"since,omitempty" jsonschema:"only messages with seq greater than this"`
	Unread bool   `json:"unread,omitempty" jsonschema:"only messages not delivered before"`
	Peek   bool   `json:"peek,omitempty" jsonschema:"show the messages without marking them delivered (writes nothing)"`
	// Follow keeps reading as messages arrive (Mailbox.Wait between
	// passes), each pass after the last message shown.
	Follow bool   `json:"-"`
	Task   string `json:"-"` // Inbox: the worker's task (default: the identity's; required). Outbox ignores it.
	// Via is how the front end shows what it marks delivered
	// (events.Event.Via): "" is events.ViaInbox; crew mcp's is
	// events.ViaMCP.
	Via string `json:"-"`
}

// Mailbox is a participant's open messages (not acknowledged or
// rejected), read in passes: a worker's inbox (what the leader sent its
// task, and broadcasts) or the leader's outbox (what workers sent). Close
// it when done.
type Mailbox struct {
	r      *run.Run
	who    string // a task id, or run.Leader
	name   string // the command that reads it: inbox or outbox
	o      run.InboxOptions
	w      store.Waiter // with Follow
	warn   func(error)
	passes int
	alive  func() // a sign of the reader's life, each pass (SignOfLife)
}

// Inbox opens the worker's inbox: req.Task, else the identity's task
// (none is crew.ErrInvalid), in req.Run (else the identity's, else the
// latest run). warn, when not nil, is told what the caller may want to
// say but does not stop the reading (a Since past the log's end).
func (a *App) Inbox(req Read, warn func(error)) (*Mailbox, error) {
	id := req.Task
	if id == "" {
		id = a.Identity.Task
	}
	if id == "" {
		return nil, fmt.Errorf("no task: give --task ID or set CREW_TASK (inbox is a worker's view; the leader reads what workers sent with crew outbox): %w", crew.ErrInvalid)
	}
	if err := crew.ValidateID("task", id); err != nil {
		return nil, err
	}
	m, err := a.mailbox(req, id, "inbox", warn)
	if err == nil {
		m.alive = func() { supervise.Alive(m.r, id, false) }
	}
	return m, err
}

// Outbox opens the leader's outbox: what workers sent (questions,
// reports) not yet acknowledged. warn is as for Inbox.
func (a *App) Outbox(req Read, warn func(error)) (*Mailbox, error) {
	m, err := a.mailbox(req, run.Leader, "outbox", warn)
	if err == nil {
		m.alive = func() { a.SignOfLife(m.r) }
	}
	return m, err
}

func (a *App) mailbox(req Read, who, name string, warn func(error)) (*Mailbox, error) {
	r, err := a.Run(req.Run)
	if err != nil {
		return nil, err
	}
	m := &Mailbox{r: r, who: who, name: name, o: run.InboxOptions{Since: req.Since, Unread: req.Unread, Peek: req.Peek, Via: req.Via}, warn: warn}
	if req.Follow {
		m.w = r.Watch(who) // the messages of who's mailbox concern who (state.Concerns)
	}
	return m, nil
}

// Read makes one pass over the mailbox, a sign of its worker's life
// (SignOfLife): it marks the messages it will
// show delivered (unless Peek), then calls fn with each, oldest first,
// and returns how many it showed. An error from fn stops it and is
// returned. A damaged log is crew.ErrDamaged after what could be read; a
// failure to mark the messages delivered is a *run.DeliverError (which
// it wraps), and nothing is shown. With Follow, the next pass starts
// after the last message shown. A first pass that shows nothing after a
// Since past the log's end warns.
func (m *Mailbox) Read(ctx context.Context, fn func(*events.Message) error) (int, error) {
	if m.alive != nil {
		m.alive()
	}
	n := 0
	err := m.r.EachInbox(ctx, m.who, m.o, func(msg *events.Message) error {
		n++
		if msg.Seq > m.o.Since && m.w != nil {
			m.o.Since = msg.Seq
		}
		return fn(msg)
	})
	if de := (*run.DeliverError)(nil); errors.As(err, &de) {
		err = fmt.Errorf("%w; crew %s --peek shows the messages without marking them", err, m.name)
	}
	if m.passes++; err == nil && n == 0 && m.o.Since > 0 && m.passes == 1 {
		// Nothing after the cursor: it may be past the log's end.
		if st, serr := m.r.TaskState(); serr == nil {
			warnPastEnd(m.warn, m.r, m.o.Since, st.Seq)
		}
	}
	return n, err
}

// Follow reports whether the mailbox was opened to follow (Read.Follow).
func (m *Mailbox) Follow() bool { return m.w != nil }

// Wait returns when the run's log may have grown since the last pass
// with an event that concerns the mailbox's reader (state.Concerns), or
// with ctx's error. It returns at once without Follow.
func (m *Mailbox) Wait(ctx context.Context) error {
	if m.w == nil {
		return nil
	}
	return m.w.Wait(ctx)
}

// Close lets the mailbox's watch go.
func (m *Mailbox) Close() {
	if m.w != nil {
		m.w.Close()
	}
}

// warnPastEnd tells warn (when not nil) that a cursor since lies past the
// end of r's log, whose last seq is head: nothing is there to show, and
// such a cursor most often comes from another run.
func warnPastEnd(warn func(error), r *run.Run, since, head int64) {
	if warn != nil && since > head {
		warn(fmt.Errorf("--since %d is past the end of run %s, whose last event is seq %d: is the cursor from another run?", since, r.ID(), head))
	}
}

// Pending is the request of Pending: what is open for the leader, or for
// a worker.
type Pending struct {
	Run        string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	QuietAfter string `json:"quiet_after,omitempty" jsonschema:"for the leader: a running task whose worker shows no sign of life for this duration (default 5m) is listed as quiet"`
	// UndeliveredAfter is how long a message sent to a worker may stay
	// undelivered before the leader's view lists it (Open.Undelivered).
	UndeliveredAfter string `json:"undelivered_after,omitempty" jsonschema:"for the leader: a message sent to a worker and not delivered for this duration (default 2m) is listed with the likely reason"`
	Task             string `json:"-"` // the worker's task (default: the identity's); none: the leader's view
}

// Open is what Pending finds open (docs/reading.md, Pending).
type Open struct {
	// Leader tells the leader's view from a worker's.
	Leader bool
	// Messages are the reader's open messages, most urgent first, then
	// oldest first: for the leader, the workers' questions and reports
	// not yet acknowledged (a question no task waits on any more was
	// answered by default and has Reason run.AnsweredByDefault), and
	// crew's failure and timeout messages (events.SenderCrew); for a
	// worker, its messages not yet acknowledged.
	Messages []events.Message
	// Lifeless, for the leader only, are the tasks whose worker is quiet,
	// then those whose worker is dead.
	Lifeless []TaskLiveness
	// Undelivered, for the leader only, are the messages sent to workers
	// and not delivered for longer than Pending.UndeliveredAfter, oldest
	// first, with the likely reason.
	Undelivered []Undelivered
}

// TaskLiveness is a task whose worker is quiet or dead, as the leader's
// pending lists it and the leader's watch tells of it:
// {"kind":"quiet"|"dead","liveness":{...},"task":{...}}.
type TaskLiveness struct {
	Kind     string        `json:"kind"` // run.LiveQuiet or run.LiveDead
	Liveness *run.Liveness `json:"liveness"`
	Task     *state.Task   `json:"task"`
}

// Pending reads what is open for the reader: req.Task's worker (else the
// identity's task; its reading is a sign of its life), or with none the
// leader. It marks nothing delivered. For the leader, the lost workers it
// finds (supervise.TasksAlive) are recorded before the messages are
// read, so that their failures are among them. A damaged log returns what could
// be read with an error wrapping crew.ErrDamaged; so does a failure to
// read the tasks' liveness (the messages, without Lifeless), or a bad
// QuietAfter (crew.ErrInvalid; read only for the leader).
func (a *App) Pending(ctx context.Context, req Pending) (*Open, error) {
	r, who, err := a.reader(req.Run, req.Task)
	if err != nil {
		return nil, err
	}
	var (
		st         *state.State
		live       map[string]*run.Liveness
		aliveErr   error
		leader     = who == run.Leader
		quietErr   error
		quietAfter = run.DefaultQuietAfter
	)
	if leader && req.QuietAfter != "" {
		quietAfter, quietErr = ParseDuration(req.QuietAfter)
	}
	after, afterErr := undeliveredAfter(req.UndeliveredAfter)
	if leader && afterErr != nil {
		return nil, afterErr
	}
	if leader && quietErr == nil {
		// Before the messages are read: a lost worker found here fails
		// its task, and the failure's message is then among them.
		st, live, aliveErr = supervise.StateAlive(ctx, r, quietAfter)
	}
	if !leader {
		p, err := r.Pending(who)
		if p == nil {
			return nil, err
		}
		return &Open{Messages: p.Messages}, err
	}
	// The leader's view is read from one whole state: its own open
	// messages, the questions answered by default and the messages not
	// delivered to the workers; the one StateAlive read, when it could.
	whole := st
	if whole == nil {
		if whole, err = r.State(); err != nil {
			return nil, err
		}
	}
	p, perr := r.PendingIn(whole, who)
	if p == nil {
		return nil, perr
	}
	open := &Open{Leader: leader, Messages: p.Messages}
	answeredByDefault(whole, open.Messages)
	if err := errors.Join(quietErr, aliveErr); err != nil {
		return open, err
	}
	open.Lifeless = lifeless(st, live)
	if perr == nil && st.Err() == nil {
		if open.Undelivered, err = undelivered(r, whole, live, after, ""); err != nil {
			return open, err
		}
	}
	return open, perr
}

// answeredByDefault gives the questions among msgs that no task of st
// waits on any more, and that have a default answer, the reason
// run.AnsweredByDefault (docs/state-machine.md, Asking with a deadline).
// st is the state msgs were read from.
func answeredByDefault(st *state.State, msgs []events.Message) {
	waitedOn := map[string]bool{}
	for _, t := range st.Tasks {
		if t.Question != "" {
			waitedOn[t.Question] = true
		}
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Kind != events.KindQuestion || waitedOn[m.ID] {
			continue
		}
		if a := state.AskOf(m); a != nil && a.Default != nil {
			m.Reason = run.AnsweredByDefault
		}
	}
}

// lifeless lists the tasks of st whose worker is quiet, then those whose
// worker is dead, each in st's task order.
func lifeless(st *state.State, live map[string]*run.Liveness) []TaskLiveness {
	var out []TaskLiveness
	for _, want := range []string{run.LiveQuiet, run.LiveDead} {
		for _, t := range st.TaskList() {
			if l := live[t.ID]; l != nil && l.State == want {
				out = append(out, TaskLiveness{Kind: l.State, Liveness: l, Task: t})
			}
		}
	}
	return out
}

// reader resolves the participant a reading operation acts for: the
// worker's task (task, else the identity's), whose reading is a sign of
// its life (docs/concepts.md, Liveness), else the leader (run.Leader).
func (a *App) reader(runID, task string) (*run.Run, string, error) {
	r, err := a.Run(runID)
	if err != nil {
		return nil, "", err
	}
	if task == "" {
		task = a.Identity.Task
	}
	if task == "" {
		return r, run.Leader, nil
	}
	if err := crew.ValidateID("task", task); err != nil {
		return nil, "", err
	}
	supervise.Alive(r, task, false)
	return r, task, nil
}

// alive is SignOfLife for an operation that reads outside a run (mail):
// of the identity's task, in the identity's run, else the latest.
func (a *App) alive() {
	if a.Identity.Task == "" {
		return
	}
	if r, err := a.Run(""); err == nil {
		a.SignOfLife(r)
	}
}

// SignOfLife records that the identity's worker, when the identity has
// a task, read run r: every reading command a worker runs (inbox,
// outbox, pending, task show, mail read, events) is a sign of its life
// (docs/concepts.md, Liveness), a heartbeat by supervise.Alive, which
// creates no file. r is the run read: a reading of another run than the
// identity's says nothing of the worker's task. Front ends whose reading
// is not yet an app operation call it; the operations of app call it
// themselves.
func (a *App) SignOfLife(r *run.Run) {
	if a.Identity.Task == "" || r == nil || (a.Identity.Run != "" && a.Identity.Run != r.ID()) {
		return
	}
	if crew.ValidateID("task", a.Identity.Task) == nil {
		supervise.Alive(r, a.Identity.Task, false)
	}
}
