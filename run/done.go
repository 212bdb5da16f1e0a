package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/task"
)

// DefaultDoneTimeout bounds a done-when check (SPEC §3).
const DefaultDoneTimeout = 10 * time.Minute

// Check is the outcome of a task's done-when command, stored in the
// task.completed event (or shown by task verify).
type Check struct {
	Command  string  `json:"command"`
	ExitCode int     `json:"exitCode"`         // -1 when it did not exit (timeout, not startable)
	Output   string  `json:"output,omitempty"` // the last CheckTail bytes of stdout and stderr, interleaved
	Seconds  float64 `json:"seconds"`          // wall time
	TimedOut bool    `json:"timedOut,omitempty"`
}

// CheckTail is how much of a check's output is kept, in bytes.
const CheckTail = 4096

// Verify runs the task's done-when command with sh -c in the directory the
// run was created from, bounded by timeout (DefaultDoneTimeout when 0). It
// returns the check and nil when the command exited 0, an error wrapping
// crew.ErrConflict that shows the output otherwise. A task without a
// done-when returns (nil, nil).
func (r *Run) Verify(ctx context.Context, id string, timeout time.Duration) (*Check, error) {
	st, err := r.State()
	if err != nil {
		return nil, err
	}
	t, err := getTask(st, id)
	if err != nil {
		return nil, err
	}
	if t.DoneWhen == "" {
		return nil, nil
	}
	if timeout <= 0 {
		timeout = DefaultDoneTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", t.DoneWhen)
	cmd.Dir = r.Manifest.Dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	start := time.Now()
	runErr := cmd.Run()
	c := &Check{Command: t.DoneWhen, ExitCode: -1, Seconds: time.Since(start).Seconds()}
	if cmd.ProcessState != nil {
		c.ExitCode = cmd.ProcessState.ExitCode()
	}
	c.Output = string(tail(out.Bytes(), CheckTail))
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		c.TimedOut = true
		return c, fmt.Errorf("task %s is not done: its check %q did not finish within %s:\n%s: %w", t.ID, t.DoneWhen, timeout, strings.TrimRight(c.Output, "\n"), crew.ErrConflict)
	}
	if runErr != nil {
		return c, fmt.Errorf("task %s is not done: its check %q failed (%v):\n%s: %w", t.ID, t.DoneWhen, runErr, strings.TrimRight(c.Output, "\n"), crew.ErrConflict)
	}
	return c, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// Complete completes a task: if it has a done-when command, Complete runs
// it first (Verify) and refuses with crew.ErrConflict unless it exits 0;
// the check's result is stored in the task.completed event.
func (r *Run) Complete(ctx context.Context, id, actor string, timeout time.Duration) (*Task, *Check, error) {
	// Refuse early, before a long check, when the task cannot complete.
	st, err := r.State()
	if err != nil {
		return nil, nil, err
	}
	t, err := getTask(st, id)
	if err != nil {
		return nil, nil, err
	}
	if _, err := task.Next(t.ID, t.Status, task.Complete); err != nil {
		return nil, nil, err
	}
	check, err := r.Verify(ctx, id, timeout)
	if err != nil {
		return nil, check, err
	}
	var data json.RawMessage
	if check != nil {
		data, _ = json.Marshal(map[string]any{"check": check})
	}
	done, err := r.Transition(ctx, id, task.Complete, actor, "", data)
	return done, check, err
}
