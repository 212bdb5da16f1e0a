package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/internal/tail"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// DefaultDoneTimeout bounds a done-when check (docs/state-machine.md, Operations and their events).
const DefaultDoneTimeout = 10 * time.Minute

// CheckTail is how much of a check's output is kept, in bytes. Only that
// much is held in memory, however much the command prints.
const CheckTail = 4096

// Verify runs the task's done-when command with sh -c in the directory the
// run was created from (Manifest.Dir; for a run on a server (store/nats), the
// working directory of this process, since the run's creator may be on
// another machine), with CREW_RUN and CREW_TASK set,
// standard input empty, bounded by timeout (DefaultDoneTimeout when 0). On
// Unix the command runs in its own process group, and the whole group is
// killed at the timeout, so a check's children do not outlive it; on
// Linux the group is killed too when the process running the check dies,
// even by SIGKILL (checkCommand).
//
// It returns the check and nil when the command exited 0, and an error
// wrapping crew.ErrConflict that shows the tail of the output otherwise
// (exit status, timeout, or a command that could not start). A task
// without a done-when returns (nil, nil). If ctx is cancelled (Ctrl-C), the
// error wraps ctx.Err(), not crew.ErrConflict.
func (r *Run) Verify(ctx context.Context, id string, timeout time.Duration) (*state.Check, error) {
	st, err := r.TaskState()
	if err != nil {
		return nil, err
	}
	t, err := st.Task(id)
	if err != nil {
		return nil, err
	}
	if t.DoneWhen == "" {
		return nil, nil
	}
	if timeout <= 0 {
		timeout = DefaultDoneTimeout
	}
	dir := r.Manifest.Dir
	if r.Dir() == "" {
		// The run lives on a server (no run directory), and its
		// creator's directory may be on another machine: the check runs where the process completing
		// the task runs (the worker's checkout).
		if dir, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("task %s: cannot run its check %q: the run's directory %s is gone (a check runs where the run was created): %w", t.ID, t.DoneWhen, dir, crew.ErrConflict)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := checkCommand(cctx, t.DoneWhen)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CREW_RUN="+r.ID(), "CREW_TASK="+t.ID)
	out := &tail.Buffer{Max: CheckTail}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second // a child that keeps the output pipe open does not hold us
	start := time.Now()
	runErr := runCheck(cmd)
	c := &state.Check{Command: t.DoneWhen, ExitCode: -1, Seconds: time.Since(start).Seconds(), Output: out.String()}
	if cmd.ProcessState != nil {
		c.ExitCode = cmd.ProcessState.ExitCode()
	}
	shown := strings.TrimRight(c.Output, "\n")
	if shown != "" {
		shown = ":\n" + shown
	}
	switch {
	case ctx.Err() != nil && runErr != nil:
		return c, fmt.Errorf("task %s: check %q interrupted: %w", t.ID, t.DoneWhen, ctx.Err())
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		c.TimedOut, c.ExitCode = true, -1
		return c, fmt.Errorf("task %s is not done: its check %q did not finish within %s (--done-timeout)%s: %w", t.ID, t.DoneWhen, timeout, shown, crew.ErrConflict)
	case runErr != nil:
		return c, fmt.Errorf("task %s is not done: its check %q failed (%v)%s: %w", t.ID, t.DoneWhen, runErr, shown, crew.ErrConflict)
	}
	return c, nil
}

// CompleteOptions are the settings of Complete.
type CompleteOptions struct {
	// Timeout bounds the done-when check; DefaultDoneTimeout when 0.
	Timeout time.Duration
	// Force completes the task even though its worker has not read
	// follow-ups sent to it (unreadFollowUps).
	Force bool
}

// Complete completes a task: if it has a done-when command, Complete runs
// it first (Verify) and refuses with crew.ErrConflict unless it exits 0;
// the check's result is stored in the task.completed event. Unless
// o.Force, a task with follow-ups its worker has not read is refused
// too (crew.ErrConflict, naming them): completing would drop the work
// they queue. A task that cannot complete is refused before its check
// runs.
func (r *Run) Complete(ctx context.Context, id, actor string, o CompleteOptions) (*state.Task, *state.Check, error) {
	// Refuse early, before a long check, when the task cannot complete.
	st, err := r.stateFor(id)
	if err != nil {
		return nil, nil, err
	}
	t, err := r.taskIn(st, id)
	if err != nil {
		return nil, nil, err
	}
	if _, err := task.Next(t.ID, t.Status, task.Complete); err != nil {
		return nil, nil, err
	}
	var allowed func(*state.State, *state.Task) error
	if !o.Force {
		allowed = unreadFollowUps
		if err := allowed(st, t); err != nil {
			return nil, nil, err
		}
	}
	check, err := r.Verify(ctx, id, o.Timeout)
	if err != nil {
		return nil, check, err
	}
	var data json.RawMessage
	if check != nil {
		data = state.CheckData(check)
	}
	// The check may have taken minutes: the transition is validated again
	// under the run lock (the leader may have cancelled the task, or sent
	// a follow-up, meanwhile).
	done, err := r.transition(context.WithoutCancel(ctx), id, task.Complete, actor, "", data, st, allowed)
	return done, check, err
}

// unreadFollowUps refuses to complete task t while follow-ups sent to it
// are pending (not yet delivered: its worker has not read them), with
// crew.ErrConflict naming them. st tracks t's open messages.
func unreadFollowUps(st *state.State, t *state.Task) error {
	var ids []string
	for _, o := range st.OpenFor(t.ID) {
		if o.Kind == events.KindFollowUp && o.Status == events.StatusPending {
			ids = append(ids, o.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	them := "them"
	if len(ids) == 1 {
		them = "it"
	}
	return fmt.Errorf("task %s has %s its worker has not read (%s); crew inbox --task %s shows %s: read %s first, or complete with --force: %w",
		t.ID, human.Count(len(ids), "follow-up"), strings.Join(ids, ", "), t.ID, them, them, crew.ErrConflict)
}
