package app

import (
	"context"
	"fmt"
	"time"

	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/supervise"
	"github.com/crew-dev/crew/task"
)

// TaskAdd is the request of TaskAdd: a pending task for the run.
type TaskAdd struct {
	Run      string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	ID       string `json:"id" jsonschema:"the new task's id: letters, digits, dot, dash, underscore"`
	Title    string `json:"title,omitempty" jsonschema:"a one-line title: what the worker is to do"`
	Agent    string `json:"agent,omitempty" jsonschema:"the worker agent's name (default: the task id)"`
	DoneWhen string `json:"done_when,omitempty" jsonschema:"a shell command that must exit 0 before the task may complete (e.g. go test ./...)"`
	As       string `json:"-"` // the acting agent (default: the identity's, else the run's leader)
}

// TaskRef names a task: the request of TaskStart.
type TaskRef struct {
	Run  string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Task string `json:"task,omitempty" jsonschema:"the task id (default: the server's --task or CREW_TASK)"`
	As   string `json:"-"` // the acting agent (taskActor)
}

// TaskMove is a transition with a reason: the request of TaskFail,
// TaskCancel and TaskRetry.
type TaskMove struct {
	Run    string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Task   string `json:"task,omitempty" jsonschema:"the task id (default: the server's --task or CREW_TASK)"`
	Reason string `json:"reason,omitempty" jsonschema:"why"`
	As     string `json:"-"` // the acting agent (taskActor)
}

// TaskComplete is the request of TaskComplete.
type TaskComplete struct {
	Run         string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Task        string `json:"task,omitempty" jsonschema:"the task id (default: the server's --task or CREW_TASK)"`
	DoneTimeout string `json:"done_timeout,omitempty" jsonschema:"bound on the task's done-when check (default 10m)"`
	Force       bool   `json:"force,omitempty" jsonschema:"complete even though the worker has not read follow-ups sent to it"`
	As          string `json:"-"` // the acting agent (taskActor)
}

// TaskVerify is the request of TaskVerify.
type TaskVerify struct {
	Run         string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Task        string `json:"task,omitempty" jsonschema:"the task id (default: the server's --task or CREW_TASK)"`
	DoneTimeout string `json:"done_timeout,omitempty" jsonschema:"bound on the check (default 10m)"`
}

// TaskShow is the request of TaskShow.
type TaskShow struct {
	Run              string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	Task             string `json:"task,omitempty" jsonschema:"the task id (default: the server's --task or CREW_TASK)"`
	QuietAfter       string `json:"quiet_after,omitempty" jsonschema:"a running task whose worker shows no sign of life for this duration (default 5m) is quiet"`
	UndeliveredAfter string `json:"undelivered_after,omitempty" jsonschema:"a message sent to the task and not delivered for this duration (default 2m) is listed with the likely reason"`
}

// TaskList is the request of TaskList.
type TaskList struct {
	Run        string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
	QuietAfter string `json:"quiet_after,omitempty" jsonschema:"a running task whose worker shows no sign of life for this duration (default 5m) is quiet"`
}

// TaskRecord is a task as the task operations return it and crew task
// prints it with --json: the task, and (TaskList, TaskShow) what it is
// doing when it has not ended.
type TaskRecord struct {
	*state.Task
	Liveness *run.Liveness `json:"liveness,omitempty"`
	// QuestionText is the text of the question the task waits on
	// (TaskShow only).
	QuestionText string `json:"questionText,omitempty"`
	// Undelivered are the messages sent to the task and not delivered
	// for longer than TaskShow.UndeliveredAfter, with the likely reason
	// (TaskShow only).
	Undelivered []Undelivered `json:"undelivered,omitempty"`
	Run         string        `json:"-"` // the run's id
}

// Verified is the record of TaskVerify: the check that passed, or for a
// task without a done-when check {"check":null,"task":ID}.
type Verified struct {
	Task  string       // the task verified
	Check *state.Check // nil: the task has no done-when check
}

// MarshalJSON encodes the check itself, or {"check":null,"task":ID}.
func (v Verified) MarshalJSON() ([]byte, error) {
	if v.Check != nil {
		return marshal(v.Check)
	}
	return marshal(map[string]any{"task": v.Task, "check": nil})
}

// TaskAdd adds a pending task to the run, acting as the leader (req.As,
// else the identity's agent, else the run's leader), and returns it.
// Errors (run.Run.AddTask): crew.ErrInvalid for a bad or reserved id,
// crew.ErrConflict for a task that exists.
func (a *App) TaskAdd(ctx context.Context, req TaskAdd) (*TaskRecord, error) {
	r, actor, err := a.leader(req.Run, req.As)
	if err != nil {
		return nil, err
	}
	return record(r)(r.AddTask(ctx, req.ID, state.TaskSpec{Title: req.Title, Agent: req.Agent, DoneWhen: req.DoneWhen}, actor))
}

// TaskStart starts a pending task and returns it. A task in another
// state is crew.ErrConflict.
func (a *App) TaskStart(ctx context.Context, req TaskRef) (*TaskRecord, error) {
	return a.move(ctx, task.Start, TaskMove{Run: req.Run, Task: req.Task, As: req.As})
}

// TaskFail fails a task that has not ended and returns it.
func (a *App) TaskFail(ctx context.Context, req TaskMove) (*TaskRecord, error) {
	return a.move(ctx, task.Fail, req)
}

// TaskCancel cancels a task that has not ended and returns it.
func (a *App) TaskCancel(ctx context.Context, req TaskMove) (*TaskRecord, error) {
	return a.move(ctx, task.Cancel, req)
}

// TaskRetry puts a failed or cancelled task back to pending and returns
// it.
func (a *App) TaskRetry(ctx context.Context, req TaskMove) (*TaskRecord, error) {
	return a.move(ctx, task.Retry, req)
}

// move carries out transition op on the task of req. A transition the
// task's state does not allow is crew.ErrConflict (task.TransitionError).
func (a *App) move(ctx context.Context, op task.Op, req TaskMove) (*TaskRecord, error) {
	r, id, actor, err := a.taskActor(req.Run, req.Task, req.As)
	if err != nil {
		return nil, err
	}
	return record(r)(r.Transition(ctx, id, op, actor, req.Reason, nil))
}

// TaskComplete completes a running task and returns it: its done-when
// check (if any; the task's DoneWhen) runs first, bounded by
// req.DoneTimeout (run.DefaultDoneTimeout when ""), and must pass. A
// check that fails, and unless req.Force follow-ups the worker has not
// read, are crew.ErrConflict (run.Run.Complete).
func (a *App) TaskComplete(ctx context.Context, req TaskComplete) (*TaskRecord, error) {
	r, id, actor, err := a.taskActor(req.Run, req.Task, req.As)
	if err != nil {
		return nil, err
	}
	d, err := doneTimeout(req.DoneTimeout)
	if err != nil {
		return nil, err
	}
	t, _, err := r.Complete(ctx, id, actor, run.CompleteOptions{Timeout: d, Force: req.Force})
	return record(r)(t, err)
}

// TaskVerify runs the task's done-when check without completing it. A
// check that fails is crew.ErrConflict showing its output (run.Run.Verify).
func (a *App) TaskVerify(ctx context.Context, req TaskVerify) (*Verified, error) {
	id, err := a.task(req.Task)
	if err != nil {
		return nil, err
	}
	r, err := a.Run(req.Run)
	if err != nil {
		return nil, err
	}
	d, err := doneTimeout(req.DoneTimeout)
	if err != nil {
		return nil, err
	}
	check, err := r.Verify(ctx, id, d)
	if err != nil {
		return nil, err
	}
	return &Verified{Task: id, Check: check}, nil
}

// record returns a function that makes the record of a task of r that
// an operation returned.
func record(r *run.Run) func(*state.Task, error) (*TaskRecord, error) {
	return func(t *state.Task, err error) (*TaskRecord, error) {
		if err != nil {
			return nil, err
		}
		return &TaskRecord{Task: t, Run: r.ID()}, nil
	}
}

// doneTimeout parses a --done-timeout; "" is 0 (run.DefaultDoneTimeout).
func doneTimeout(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return ParseDuration(s)
}

// TaskShow returns one task (req.Task, else the identity's) with what it
// is doing and the text of the question it waits on. Read by a worker,
// it is a sign of its life (SignOfLife). Unknown is a *state.NoTaskError
// (crew.ErrNotFound, with a did-you-mean). A damaged log returns the task
// as far as it could be read with an error wrapping crew.ErrDamaged.
func (a *App) TaskShow(ctx context.Context, req TaskShow) (*TaskRecord, error) {
	id, err := a.task(req.Task)
	if err != nil {
		return nil, err
	}
	r, err := a.Run(req.Run)
	if err != nil {
		return nil, err
	}
	a.SignOfLife(r)
	st, live, err := tasksAlive(ctx, r, req.QuietAfter)
	if err != nil {
		return nil, err
	}
	t, err := st.Task(id)
	if err != nil {
		return nil, err
	}
	rec := &TaskRecord{Task: t, Liveness: live[t.ID], Run: r.ID()}
	if t.Question != "" {
		if q, err := r.FindMessage(t.Question); err == nil {
			rec.QuestionText = q.Body
		}
	}
	after, err := undeliveredAfter(req.UndeliveredAfter)
	if err != nil {
		return nil, err
	}
	if st.Err() == nil { // a damaged log says so below; what it holds is shown
		if rec.Undelivered, err = undelivered(r, st, live, after, t.ID); err != nil {
			return rec, err
		}
	}
	return rec, st.Err()
}

// TaskList returns the run's tasks in creation order, each with what it
// is doing. A damaged log returns the tasks as far as it could be read
// with an error wrapping crew.ErrDamaged that names the run.
func (a *App) TaskList(ctx context.Context, req TaskList) ([]TaskRecord, error) {
	r, err := a.Run(req.Run)
	if err != nil {
		return nil, err
	}
	st, live, err := tasksAlive(ctx, r, req.QuietAfter)
	if err != nil {
		return nil, err
	}
	recs := []TaskRecord{}
	for _, t := range st.TaskList() {
		recs = append(recs, TaskRecord{Task: t, Liveness: live[t.ID], Run: r.ID()})
	}
	if err := st.Err(); err != nil {
		return recs, fmt.Errorf("run %s: %w", r.ID(), err)
	}
	return recs, nil
}

// tasksAlive reads r's tasks with what each is doing
// (supervise.TasksAlive), a task being quiet after quietAfter
// (run.DefaultQuietAfter when "").
func tasksAlive(ctx context.Context, r *run.Run, quietAfter string) (*state.State, map[string]*run.Liveness, error) {
	d := run.DefaultQuietAfter
	if quietAfter != "" {
		var err error
		if d, err = ParseDuration(quietAfter); err != nil {
			return nil, nil, err
		}
	}
	return supervise.TasksAlive(ctx, r, d)
}

// taskActor resolves a task operation: its run, its task (id, else the
// identity's; required) and the agent acting: as, else the identity's,
// else the task's agent when the task is the identity's own (its worker
// acts), else the run's leader.
func (a *App) taskActor(runID, id, as string) (*run.Run, string, string, error) {
	return a.taskAndActor(runID, id, as, func(r *run.Run, id string) string {
		if id == a.Identity.Task {
			return taskAgent(r, id)
		}
		return r.Manifest.Leader
	})
}
