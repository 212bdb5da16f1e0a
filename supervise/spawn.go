package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/proc"
	"github.com/crew-dev/crew/internal/tail"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
)

// SpawnOptions are the settings of Spawn.
type SpawnOptions struct {
	Task    string
	Command []string // the program and its arguments
	Retries int      // how many times a worker that exits before its task ends is started again
	// Terminal runs the worker on this process's standard streams (a
	// tmux window a person may type into) instead of the log file;
	// whoever made the terminal copies its output into the log (tmux
	// pipe-pane).
	Terminal bool
	Tmux     string   // the tmux window (SESSION:WINDOW) the worker runs in, recorded in worker.started
	Env      []string // more environment variables (NAME=VALUE) for the worker
	// Grace is how long a worker that is stopped has between SIGTERM
	// and SIGKILL (state.DefaultGrace when 0); recorded in
	// worker.started.
	Grace time.Duration
	// Started, when not nil, is called once each attempt's worker.started
	// is recorded.
	Started func(*state.Worker)
}

// Spawn runs a supervised worker for a task of r (docs/concepts.md,
// Supervised workers): o.Command in the run's directory with CREW_DIR,
// CREW_RUN, CREW_TASK and CREW_AGENT set, its output appended to the
// task's worker log (WorkerLog). It records worker.started (pid, start
// time, host, command, attempt; run.Run.WorkerStarted), waits for the
// process, and records worker.exited (exit status or signal, the tail
// of its output; run.Run.WorkerExited). A worker that exits while its
// task has not ended fails the task with the reason, or, while
// o.Retries allows, puts it back to pending (task.Restart) and starts
// the next attempt. It returns how the last attempt ended.
//
// While the worker runs, Spawn watches the run's log: when the worker's
// stop is asked there (state.Worker.Stop: its task was ended by someone
// other than its worker, or crew run stop asked), it stops the worker
// (SIGTERM to its process group, SIGKILL after o.Grace) and records how
// in worker.exited (state.Stopped). A stopped worker is not started
// again. The same holds on every store: the request is in the log, and
// the crew spawn on the worker's machine carries it out.
//
// Errors: crew.ErrNotFound for an unknown task; crew.ErrConflict for a
// terminal task or one whose worker still runs (naming its pid);
// crew.ErrInvalid for no command, negative retries or a command that
// cannot start. When ctx is cancelled, the worker is stopped the same
// way, its exit is recorded, and ctx's error is returned.
func Spawn(ctx context.Context, r *run.Run, o SpawnOptions) (*state.WorkerExit, error) {
	if len(o.Command) == 0 {
		return nil, fmt.Errorf("no command to run for task %s: give it after --: %w", o.Task, crew.ErrInvalid)
	}
	if o.Retries < 0 {
		return nil, fmt.Errorf("--retries %d: give 0 or more: %w", o.Retries, crew.ErrInvalid)
	}
	if o.Grace < 0 {
		return nil, fmt.Errorf("--grace %s: give 0 or more: %w", o.Grace, crew.ErrInvalid)
	}
	if o.Grace == 0 {
		o.Grace = state.DefaultGrace
	}
	if _, err := CheckSpawn(ctx, r, o.Task); err != nil {
		return nil, err
	}
	var (
		exit *state.WorkerExit
		err  error
	)
	for attempt := 0; ; attempt++ {
		more := attempt < o.Retries
		exit, err = runAttempt(ctx, r, o, more)
		if err != nil || ctx.Err() != nil || !more || exit.Stopped != nil {
			return exit, errors.Join(err, ctx.Err())
		}
		st, err := r.TaskState()
		if err != nil {
			return exit, err
		}
		if t := st.Tasks[o.Task]; t == nil || t.Status.Terminal() {
			return exit, nil // it ended as its worker exited: nothing to restart
		}
	}
}

// runAttempt runs one worker process for o.Task and records its start
// and exit; more says whether another attempt may follow.
func runAttempt(ctx context.Context, r *run.Run, o SpawnOptions, more bool) (*state.WorkerExit, error) {
	st, err := r.TaskState()
	if err != nil {
		return nil, err
	}
	t, err := run.Spawnable(st, o.Task)
	if err != nil {
		return nil, err
	}
	logPath, err := WorkerLog(r, t.ID)
	if err != nil {
		return nil, err
	}
	out, err := createFile(r, logPath)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	n := len(t.Workers) + 1
	fmt.Fprintf(out, "--- crew: task %s, attempt %d, %s: %s\n", t.ID, n, events.Now(), strings.Join(o.Command, " "))
	from, _ := out.Seek(0, io.SeekEnd)
	cmd := workerCommand(r, t, n, o, out)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(out, "--- crew: cannot start: %v\n", err)
		return nil, fmt.Errorf("task %s: cannot start %q: %v: %w", t.ID, o.Command[0], err, crew.ErrInvalid)
	}
	w := workerOf(cmd.Process.Pid, n, o, logPath)
	if err := r.WorkerStarted(context.WithoutCancel(ctx), t.ID, w); err != nil {
		// Another crew spawn won the task, or it ended meanwhile.
		stopGroup(cmd, syscall.SIGKILL)
		cmd.Wait()
		return nil, err
	}
	heartbeat(r, t.ID) // its heartbeat file, which the worker's crew commands then touch (Alive)
	if o.Started != nil {
		o.Started(w)
	}
	stopped := superviseWorker(ctx, r, t.ID, w, cmd, o.Grace)
	if o.Terminal {
		TakeTerminal(os.Stdin)
	}
	x := exitOf(cmd.ProcessState, w)
	x.Tail, x.Stopped = tail.File(logPath, from, run.CheckTail), stopped
	fmt.Fprintf(out, "--- crew: task %s, attempt %d: worker %s\n", t.ID, n, x.Describe())
	return x, r.WorkerExited(context.WithoutCancel(ctx), t.ID, x, more && ctx.Err() == nil, "")
}

// CheckSpawn returns task id of r when a worker may be started for it
// now (run.Spawnable), after recording the exits of lost workers (Reap);
// else Spawn's errors (crew.ErrNotFound, crew.ErrConflict).
func CheckSpawn(ctx context.Context, r *run.Run, id string) (*state.Task, error) {
	st, err := reapState(ctx, r)
	if err != nil {
		return nil, err
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	return run.Spawnable(st, id)
}

// workerCommand is the command of attempt n: o.Command in the run's
// directory, with the task's identity in its environment, its output
// into out (or on this process's terminal), leading a process group of
// its own, which is stopped whole. On a terminal, its group is made the
// terminal's foreground group, to read what a person types and to get
// the Ctrl-C they type (foreground); crew spawn takes the terminal back
// when it has exited (TakeTerminal).
func workerCommand(r *run.Run, t *state.Task, n int, o SpawnOptions, out *os.File) *exec.Cmd {
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Dir = workDir(r)
	env := []string{"CREW_RUN=" + r.ID(), "CREW_TASK=" + t.ID, "CREW_AGENT=" + t.Agent, fmt.Sprintf("CREW_ATTEMPT=%d", n)}
	if d := r.Root().Dir(); d != "" {
		env = append(env, "CREW_DIR="+d)
	}
	cmd.Env = append(append(os.Environ(), o.Env...), env...)
	if o.Terminal {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		foreground(cmd, os.Stdin)
		return cmd
	}
	cmd.Stdout, cmd.Stderr = out, out
	groupLeader(cmd)
	return cmd
}

// workDir is where workers run: the directory the run was created from
// (Manifest.Dir), or for a run on a server (no run directory), or when
// that directory is gone, this process's working directory.
func workDir(r *run.Run) string {
	if r.Dir() != "" {
		if fi, err := os.Stat(r.Manifest.Dir); err == nil && fi.IsDir() {
			return r.Manifest.Dir
		}
	}
	wd, _ := os.Getwd()
	return wd
}

// workerOf is the worker.started record of attempt n, process pid.
func workerOf(pid, n int, o SpawnOptions, logPath string) *state.Worker {
	host, _ := os.Hostname()
	self, child := proc.Self(), proc.Of(pid)
	return &state.Worker{Attempt: n, PID: pid, Start: child.Start, Host: host, Boot: child.Boot, Command: o.Command,
		Supervisor: self.PID, SupervisorStart: self.Start, Log: logPath, Tmux: o.Tmux, Grace: o.Grace.Milliseconds()}
}

// exitOf is how process ps of worker w ended.
func exitOf(ps *os.ProcessState, w *state.Worker) *state.WorkerExit {
	x := &state.WorkerExit{Attempt: w.Attempt, PID: w.PID}
	if sig := signalOf(ps); sig != "" {
		x.Signal = sig
		return x
	}
	code := ps.ExitCode()
	x.Code = &code
	return x
}

// AwaitStart waits until task id of r has more than before workers
// recorded and returns the newest, for a process that started another
// to spawn the worker (crew spawn --tmux: the crew spawn in the tmux
// window, process pid). If that process ends first, the error wraps
// crew.ErrConflict and names the task's worker log, which says why;
// ctx's end is ctx's error.
func AwaitStart(ctx context.Context, r *run.Run, id string, before, pid int) (*state.Worker, error) {
	starter := proc.Of(pid)
	w := r.Watch(id) // worker.started of task id
	defer w.Close()
	for {
		st, err := r.TaskState()
		if err != nil {
			return nil, err
		}
		if t := st.Tasks[id]; t != nil && len(t.Workers) > before {
			return &t.Workers[len(t.Workers)-1], nil
		}
		if !starter.Alive() {
			log, _ := WorkerLog(r, id)
			return nil, fmt.Errorf("the crew spawn in the tmux window of task %s ended before starting the worker; %s says why: %w", id, log, crew.ErrConflict)
		}
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		w.Wait(wctx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}
