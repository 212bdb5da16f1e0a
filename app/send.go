package app

import (
	"context"
	"fmt"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
)

// ToWorker is a message from the leader to one task's worker: the
// request of Respond, Steer and FollowUp.
type ToWorker struct {
	Run      string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Task     string `json:"task" jsonschema:"the task id of the worker to send to"`
	Body     string `json:"body" jsonschema:"the message text"`
	Priority string `json:"priority,omitempty" jsonschema:"low, normal (default), high or urgent"`
	As       string `json:"-"` // the acting agent (default: the identity's, else the run's leader)
}

// Nudge asks a quiet worker to report its status: ToWorker with a body
// that may be left out (run.DefaultNudge).
type Nudge struct {
	Run      string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Task     string `json:"task" jsonschema:"the task id of the quiet worker"`
	Body     string `json:"body,omitempty" jsonschema:"the message text (default: Please report your status, blocker, or next step.)"`
	Priority string `json:"priority,omitempty" jsonschema:"low, normal (default), high or urgent"`
	As       string `json:"-"`
}

// Broadcast is a message from the leader to every task that has not
// ended.
type Broadcast struct {
	Run      string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Body     string `json:"body" jsonschema:"the message text"`
	Priority string `json:"priority,omitempty" jsonschema:"low, normal (default), high or urgent"`
	As       string `json:"-"`
}

// Report is a message from a worker to the leader, sent without waiting.
type Report struct {
	Run      string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Body     string `json:"body" jsonschema:"the message text"`
	Priority string `json:"priority,omitempty" jsonschema:"low, normal (default), high or urgent"`
	Task     string `json:"-"` // the worker's task (default: the identity's; required)
	As       string `json:"-"` // the acting agent (default: the identity's, else the task's agent)
}

// Respond answers a waiting task's open question and unblocks its
// worker. It returns the response as stored. Errors: crew.ErrConflict
// when the task is not waiting (saying who answered first, when one
// did), and those of Send.
func (a *App) Respond(ctx context.Context, req ToWorker) (*events.Message, error) {
	return a.toWorker(ctx, events.KindResponse, req)
}

// Steer redirects a worker at its next safe point. It returns the
// message as stored; a task that has ended is crew.ErrConflict.
func (a *App) Steer(ctx context.Context, req ToWorker) (*events.Message, error) {
	return a.toWorker(ctx, events.KindSteer, req)
}

// FollowUp queues work for after the worker's current step. It returns
// the message as stored; a task that has ended is crew.ErrConflict.
func (a *App) FollowUp(ctx context.Context, req ToWorker) (*events.Message, error) {
	return a.toWorker(ctx, events.KindFollowUp, req)
}

// Nudge asks a quiet worker to report. It returns the message as
// stored; a task that has ended is crew.ErrConflict.
func (a *App) Nudge(ctx context.Context, req Nudge) (*events.Message, error) {
	if req.Body == "" {
		req.Body = run.DefaultNudge
	}
	return a.toWorker(ctx, events.KindNudge, ToWorker(req))
}

func (a *App) toWorker(ctx context.Context, kind string, req ToWorker) (*events.Message, error) {
	if err := crew.ValidateID("task", req.Task); err != nil {
		return nil, err
	}
	r, from, err := a.leader(req.Run, req.As)
	if err != nil {
		return nil, err
	}
	return r.Send(ctx, run.SendOptions{Kind: kind, Task: req.Task, From: from, Body: req.Body, Priority: req.Priority})
}

// Broadcast sends a message to every task of the run that has not
// ended; none is crew.ErrConflict. It returns the message as stored.
func (a *App) Broadcast(ctx context.Context, req Broadcast) (*events.Message, error) {
	r, from, err := a.leader(req.Run, req.As)
	if err != nil {
		return nil, err
	}
	return r.Send(ctx, run.SendOptions{Kind: events.KindMessage, Task: events.Broadcast, From: from, Body: req.Body, Priority: req.Priority})
}

// Report tells the leader something without waiting. It returns the
// message as stored; a task that has ended is crew.ErrConflict.
func (a *App) Report(ctx context.Context, req Report) (*events.Message, error) {
	r, id, from, err := a.worker(req.Run, req.Task, req.As)
	if err != nil {
		return nil, err
	}
	return r.Send(ctx, run.SendOptions{Kind: events.KindReport, Task: id, From: from, Body: req.Body, Priority: req.Priority})
}

// Ask is a worker's question to the leader.
type Ask struct {
	Run      string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Question string `json:"question" jsonschema:"the question for the leader: say what you need decided and the options you see"`
	Priority string `json:"priority,omitempty" jsonschema:"low, normal (default), high or urgent"`
	Wait     bool   `json:"wait,omitempty" jsonschema:"block until the leader responds and return the response (recommended); without it the question's id is returned and crew_await waits later"`
	Timeout  string `json:"timeout,omitempty" jsonschema:"the question's deadline, a duration from now (e.g. 90s, 10m, 2h), stored in it: unanswered by then, the task goes back to running and a waiting call fails with class timeout, or returns the default"`
	// Default needs Timeout; a pointer, so that an empty default is
	// refused rather than taken for none.
	Default *string `json:"default,omitempty" jsonschema:"with timeout: the answer to go on with when the deadline passes unanswered (returned as a response from crew with reason answered by default)"`
	Task    string  `json:"-"` // the worker's task (default: the identity's; required)
	As      string  `json:"-"` // the acting agent (default: the identity's, else the task's agent)
}

// Ask sends a question to the leader; the task waits. Without Wait it
// returns the question as stored. With Wait it blocks until the
// response, the question's deadline (crew.ErrTimeout, or the default
// answer, whose ID is "", when the question has one) or ctx's end, and
// returns the response, acknowledged: the worker has it, so it does not
// linger in the inbox. show, when not nil, is given the response before
// it is acknowledged (the command line prints it there: a crash in
// between shows it again rather than never). On an error after the
// question was sent, the question is returned with it.
func (a *App) Ask(ctx context.Context, req Ask, show func(*events.Message) error) (*events.Message, error) {
	deadline, err := askDeadline(req.Timeout, req.Default)
	if err != nil {
		return nil, err
	}
	r, id, from, err := a.worker(req.Run, req.Task, req.As)
	if err != nil {
		return nil, err
	}
	q, m, err := r.Ask(ctx, run.SendOptions{Task: id, From: from, Body: req.Question, Priority: req.Priority, Ask: deadline}, req.Wait)
	if err != nil || !req.Wait {
		return q, err
	}
	return m, answered(ctx, r, id, m, show)
}

// askDeadline is the deadline (and default answer) stored in a question
// asked with timeout and def, or nil without timeout.
func askDeadline(timeout string, def *string) (*state.Ask, error) {
	if timeout == "" {
		if def != nil {
			return nil, fmt.Errorf("--default goes with --timeout: the default answer is for when the deadline passes: %w", crew.ErrInvalid)
		}
		return nil, nil
	}
	d, err := ParseDuration(timeout)
	if err != nil {
		return nil, err
	}
	return &state.Ask{Deadline: events.Time{Time: time.Now().Add(d).UTC().Truncate(time.Millisecond)}, Default: def}, nil
}

// Await is the wait for the response to a question asked before.
type Await struct {
	Run        string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	QuestionID string `json:"question_id" jsonschema:"the id of a question asked before (crew_ask without wait)"`
	Timeout    string `json:"timeout,omitempty" jsonschema:"give up after this duration (e.g. 10m); the call fails with class timeout"`
}

// Await blocks until the question is answered and returns the response,
// shown and acknowledged as Ask with Wait does. Errors: crew.ErrTimeout after
// Timeout or the question's own deadline, crew.ErrConflict when its task
// ended unanswered, crew.ErrNotFound for an unknown question.
func (a *App) Await(ctx context.Context, req Await, show func(*events.Message) error) (*events.Message, error) {
	r, err := a.Run(req.Run)
	if err != nil {
		return nil, err
	}
	if req.Timeout != "" {
		d, err := ParseDuration(req.Timeout)
		if err != nil {
			return nil, err
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	m, err := r.Await(ctx, req.QuestionID)
	if err != nil {
		return nil, err
	}
	return m, answered(ctx, r, m.Task, m, show)
}

// answered hands response m to show (if any) and acknowledges it for
// task: the worker has the answer, so it does not linger in its inbox.
// m carries the status it has once acknowledged (events.StatusAcknowledged),
// so that what ask --wait and crew_ask return is what the log says right
// after. show comes first, so that a waiting worker has its answer as
// soon as it is read, not one fsync later (make bench, wake_p50_ms); a
// crash in between leaves the answer unacknowledged, to be shown again
// by crew inbox, never lost. A default answer (no id) is no message to
// acknowledge. The acknowledgement is not cut short by ctx's end: the
// answer has been taken.
func answered(ctx context.Context, r *run.Run, task string, m *events.Message, show func(*events.Message) error) error {
	if m.ID != "" {
		m.Status = events.StatusAcknowledged
	}
	if show != nil {
		if err := show(m); err != nil {
			return err
		}
	}
	if m.ID == "" {
		return nil
	}
	return r.Acknowledge(context.WithoutCancel(ctx), task, []string{m.ID}, false, "")
}
