package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/internal/proc"
	"github.com/crew-dev/crew/internal/tail"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
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
	// Started, when not nil, is called once each attempt's worker.started
	// is recorded.
	Started func(*state.Worker)
}

// reasonTail is how much of a worker's output a task's reason quotes,
// in bytes (worker.exited keeps CheckTail).
const reasonTail = 1024

// Spawn runs a supervised worker for a task (docs/concepts.md,
// Supervised workers): o.Command in the run's directory with CREW_DIR,
// CREW_RUN, CREW_TASK and CREW_AGENT set, its output appended to the
// task's worker log (WorkerLog). It records worker.started (pid, start
// time, host, command, attempt), waits for the process, and records
// worker.exited (exit status or signal, the tail of its output). A
// worker that exits while its task has not ended fails the task with
// the reason, or, while o.Retries allows, puts it back to pending
// (task.Restart) and starts the next attempt. It returns how the last
// attempt ended.
//
// Errors: crew.ErrNotFound for an unknown task; crew.ErrConflict for a
// terminal task or one whose worker still runs (naming its pid);
// crew.ErrInvalid for no command, negative retries or a command that
// cannot start. When ctx is cancelled, the worker's process group gets
// SIGTERM, its exit is recorded, and ctx's error is returned.
func (r *Run) Spawn(ctx context.Context, o SpawnOptions) (*state.WorkerExit, error) {
	if len(o.Command) == 0 {
		return nil, fmt.Errorf("no command to run for task %s: give it after --: %w", o.Task, crew.ErrInvalid)
	}
	if o.Retries < 0 {
		return nil, fmt.Errorf("--retries %d: give 0 or more: %w", o.Retries, crew.ErrInvalid)
	}
	if _, err := r.CheckSpawn(ctx, o.Task); err != nil {
		return nil, err
	}
	var (
		exit *state.WorkerExit
		err  error
	)
	for attempt := 0; ; attempt++ {
		more := attempt < o.Retries
		exit, err = r.attempt(ctx, o, more)
		if err != nil || ctx.Err() != nil || !more {
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

// attempt runs one worker process for o.Task and records its start and
// exit; more says whether another attempt may follow.
func (r *Run) attempt(ctx context.Context, o SpawnOptions, more bool) (*state.WorkerExit, error) {
	st, err := r.TaskState()
	if err != nil {
		return nil, err
	}
	t, err := spawnable(st, o.Task)
	if err != nil {
		return nil, err
	}
	logPath, err := r.WorkerLog(t.ID)
	if err != nil {
		return nil, err
	}
	out, err := r.createFile(logPath)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	n := len(t.Workers) + 1
	fmt.Fprintf(out, "--- crew: task %s, attempt %d, %s: %s\n", t.ID, n, events.Now(), strings.Join(o.Command, " "))
	from, _ := out.Seek(0, io.SeekEnd)
	cmd := r.workerCommand(t, n, o, out)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(out, "--- crew: cannot start: %v\n", err)
		return nil, fmt.Errorf("task %s: cannot start %q: %v: %w", t.ID, o.Command[0], err, crew.ErrInvalid)
	}
	w := r.workerOf(cmd.Process.Pid, n, o, logPath)
	_, err = r.commit(context.WithoutCancel(ctx), func(st *state.State) (*events.Event, error) {
		t, err := spawnable(st, o.Task)
		if err != nil {
			return nil, err
		}
		return &events.Event{Type: events.WorkerStarted, Task: t.ID, Actor: t.Agent, Data: state.WorkerData(w)}, nil
	})
	if err != nil {
		// Another crew spawn won the task, or it ended meanwhile.
		stopGroup(cmd, syscall.SIGKILL)
		cmd.Wait()
		return nil, err
	}
	r.heartbeat(t.ID) // its heartbeat file, which the worker's crew commands then touch (Alive)
	if o.Started != nil {
		o.Started(w)
	}
	waitWorker(ctx, cmd)
	x := exitOf(cmd.ProcessState, w)
	x.Tail = tail.File(logPath, from, CheckTail)
	fmt.Fprintf(out, "--- crew: task %s, attempt %d: worker %s\n", t.ID, n, x.Describe())
	return x, r.recordExit(context.WithoutCancel(ctx), t.ID, x, more && ctx.Err() == nil, "")
}

// CheckSpawn returns task id when a worker may be started for it now,
// after recording the exits of lost workers (Reap); else Spawn's errors
// (crew.ErrNotFound, crew.ErrConflict).
func (r *Run) CheckSpawn(ctx context.Context, id string) (*state.Task, error) {
	st, err := r.reapState(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	return spawnable(st, id)
}

// spawnable returns task id of st when a worker may be started for it:
// it exists (else crew.ErrNotFound), has not ended and has no worker
// recorded as running (else crew.ErrConflict).
func spawnable(st *state.State, id string) (*state.Task, error) {
	t, err := st.Task(id)
	if err != nil {
		return nil, err
	}
	if t.Status.Terminal() {
		hint := ""
		if t.Status != task.Completed {
			hint = fmt.Sprintf(" (crew task retry %s reopens it)", t.ID)
		}
		return nil, fmt.Errorf("task %s is %s; no worker is started for it%s: %w", t.ID, t.Status, hint, crew.ErrConflict)
	}
	if w := t.Live(); w != nil {
		return nil, fmt.Errorf("task %s already has a worker: pid %d on %s (attempt %d, started %s); two workers on one task would do its work twice: %w",
			t.ID, w.PID, w.Host, w.Attempt, w.StartedAt, crew.ErrConflict)
	}
	return t, nil
}

// workerCommand is the command of attempt n: o.Command in the run's
// directory, with the task's identity in its environment, its output
// into out (or on this process's terminal), leading a process group of
// its own unless it runs on the terminal, where it must be in the
// foreground to read what a person types.
func (r *Run) workerCommand(t *state.Task, n int, o SpawnOptions, out *os.File) *exec.Cmd {
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Dir = r.workDir()
	env := []string{"CREW_RUN=" + r.ID(), "CREW_TASK=" + t.ID, "CREW_AGENT=" + t.Agent, fmt.Sprintf("CREW_ATTEMPT=%d", n)}
	if d := r.root.Store.Dir(); d != "" {
		env = append(env, "CREW_DIR="+d)
	}
	cmd.Env = append(append(os.Environ(), o.Env...), env...)
	if o.Terminal {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		return cmd
	}
	cmd.Stdout, cmd.Stderr = out, out
	groupLeader(cmd)
	return cmd
}

// workDir is where workers run: the directory the run was created from
// (Manifest.Dir), or for a run on a server (no run directory), or when
// that directory is gone, this process's working directory.
func (r *Run) workDir() string {
	if r.Dir() != "" {
		if fi, err := os.Stat(r.Manifest.Dir); err == nil && fi.IsDir() {
			return r.Manifest.Dir
		}
	}
	wd, _ := os.Getwd()
	return wd
}

// workerOf is the worker.started record of attempt n, process pid.
func (r *Run) workerOf(pid, n int, o SpawnOptions, logPath string) *state.Worker {
	host, _ := os.Hostname()
	self, child := proc.Self(), proc.Of(pid)
	return &state.Worker{Attempt: n, PID: pid, Start: child.Start, Host: host, Boot: child.Boot, Command: o.Command,
		Supervisor: self.PID, SupervisorStart: self.Start, Log: logPath, Tmux: o.Tmux}
}

// waitWorker waits for cmd to exit. When ctx ends first (Ctrl-C,
// SIGTERM, SIGHUP of crew spawn), the worker's process group gets
// SIGTERM, and SIGKILL if it has not exited 10 seconds later.
func waitWorker(ctx context.Context, cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	stopGroup(cmd, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		stopGroup(cmd, syscall.SIGKILL)
		<-done
	}
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

// recordExit records that task id's worker attempt x.Attempt ended, as
// x says, unless that is already recorded (a reader found it gone
// first). A task that has not ended fails, with the reason, or with
// restart goes back to pending for the next attempt. why, when not
// empty, replaces the start of the reason ("worker exited with status 2").
func (r *Run) recordExit(ctx context.Context, id string, x *state.WorkerExit, restart bool, why string) error {
	_, err := r.commit(ctx, func(st *state.State) (*events.Event, error) {
		t, err := st.Task(id)
		if err != nil {
			return nil, err
		}
		if w := t.Live(); w == nil || w.Attempt != x.Attempt {
			return nil, nil
		}
		ev := &events.Event{Type: events.WorkerExited, Task: t.ID, Actor: state.CrewActor, Data: state.WorkerData(x)}
		if t.Status.Terminal() {
			return ev, nil
		}
		if why == "" {
			why = "worker " + x.Describe()
		}
		op := task.Fail
		ev.Reason = why + tailReason(x.Tail)
		if restart {
			op = task.Restart
			ev.Reason = fmt.Sprintf("%s; starting attempt %d", why, x.Attempt+1)
		}
		if restart && t.Status == task.Pending {
			return ev, nil // not started yet: it stays pending for the next attempt
		}
		next, err := task.Next(t.ID, t.Status, op)
		if err != nil {
			return nil, err
		}
		ev.From, ev.To = string(t.Status), string(next)
		return ev, nil
	})
	return err
}

// tailReason is the end of a worker's output as a reason quotes it:
// "\nits output ended with:\n…" (so a reason's first line says what happened), or "" for no output.
func tailReason(out string) string {
	out = strings.TrimRight(out, "\n")
	if out == "" {
		return ""
	}
	if len(out) > reasonTail {
		b := &tail.Buffer{Max: reasonTail}
		b.Write([]byte(out))
		out = "…" + b.String()
	}
	return "\nits output ended with:\n" + out
}

// WorkerLog returns the file a task's supervised worker writes its
// output to, and makes its directory: workers/TASK.log in the run's
// directory, or, for a run on a server, in the user's cache directory
// ($XDG_CACHE_HOME/crew/runs/RUN/workers), on the machine that runs the
// worker.
func (r *Run) WorkerLog(id string) (string, error) {
	dir, err := r.workersDir(true)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, id+".log"), nil
}

// workersDir is the directory of the run's worker logs and heartbeats;
// with make it is created if missing.
func (r *Run) workersDir(make bool) (string, error) {
	base := r.Dir()
	if base == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("no directory for worker logs of run %s: %w", r.ID(), err)
		}
		base = filepath.Join(cache, "crew", "runs", r.ID())
		if make {
			if err := os.MkdirAll(base, r.perm().Dir); err != nil {
				return "", err
			}
		}
	}
	dir := filepath.Join(base, "workers")
	if make {
		err := fsys.Mkdir(dir, r.perm().Dir)
		if err == nil {
			err = os.Chmod(dir, r.perm().Dir) // the documented mode, whatever the umask (docs/files.md, Permissions)
		}
		if err != nil && !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	return dir, nil
}

// createFile opens the file at path for appending, creating it with the
// run's file mode (set exactly, whatever the umask) when missing, and
// never through a symbolic link (fsys.OpenNoFollow).
func (r *Run) createFile(path string) (*os.File, error) {
	f, err := fsys.OpenNoFollow(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, r.perm().File)
	if errors.Is(err, os.ErrExist) { // made meanwhile by another process
		f, err = fsys.OpenNoFollow(path, os.O_WRONLY|os.O_APPEND, r.perm().File)
	}
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm() != r.perm().File.Perm() {
		f.Chmod(r.perm().File)
	}
	return f, nil
}

// perm is the modes the run's files are created with (Root.Perm).
func (r *Run) perm() crew.Perm { return r.root.Perm() }

// Reap finds the workers of st's tasks that are recorded as running on
// this machine but whose process is gone (its pid no longer alive, or
// now another process: its start time differs, or the machine rebooted)
// while the crew spawn that watched it is gone too, and records each
// exit as unknown (worker.exited), failing its task if it had not ended.
// It returns how many it recorded. A worker on another machine is left
// to crew commands run there.
func (r *Run) Reap(ctx context.Context, st *state.State) (int, error) {
	n := 0
	for _, t := range st.TaskList() {
		w := t.Live()
		if w == nil || !gone(w) {
			continue
		}
		x := &state.WorkerExit{Attempt: w.Attempt, PID: w.PID, Unknown: true, Tail: tail.File(w.Log, 0, CheckTail)}
		why := fmt.Sprintf("worker process %d is gone; crew spawn (pid %d), which watched it, died before it, so its exit status is unknown", w.PID, w.Supervisor)
		if err := r.recordExit(ctx, t.ID, x, false, why); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// gone reports whether worker w, recorded as running, is known to have
// ended without its crew spawn recording it: both processes are on this
// machine, and neither runs any more. While crew spawn lives, it records
// the exit itself.
func gone(w *state.Worker) bool {
	if host, _ := os.Hostname(); w.Host != host {
		return false
	}
	if (proc.ID{PID: w.Supervisor, Start: w.SupervisorStart, Boot: w.Boot}).Alive() {
		return false
	}
	return !(proc.ID{PID: w.PID, Start: w.Start, Boot: w.Boot}).Alive()
}

// reapState is TaskState after Reap: the tasks with the deaths of lost
// workers recorded. A failure to record one (a read-only state root) is
// not an error here: Liveness still shows such a worker dead.
func (r *Run) reapState(ctx context.Context) (*state.State, error) {
	st, err := r.TaskState()
	if err != nil || st.Err() != nil {
		return st, err
	}
	if n, err := r.Reap(ctx, st); n == 0 || err != nil {
		return st, nil
	}
	return r.TaskState()
}
