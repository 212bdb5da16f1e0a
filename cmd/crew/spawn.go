// crew spawn (start a supervised worker for a task, in the foreground or
// in a tmux window), crew task logs (its output) and crew heartbeat (a
// worker's sign of life).

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/fsnotify/fsnotify"
	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/supervise"
)

// tmuxEnv is set, by crew spawn --tmux, in the environment of the crew
// spawn it starts in the new tmux window: the window's name
// (SESSION:TASK), which that crew spawn records, running the worker on
// the window's terminal.
const tmuxEnv = "CREW_SPAWN_TMUX"

func spawnCommand() *cli.Command {
	return &cli.Command{
		Name: "spawn",
		Usage: "start a supervised worker for a task: runs CMD with CREW_DIR, CREW_RUN, CREW_TASK and CREW_AGENT set, " +
			"records its start and exit, and fails the task if the worker exits before it ended",
		UsageText: "crew spawn t1 -- claude -p \"$(cat brief.md)\"\n" +
			"crew spawn t2 --retries 2 -- ./worker.sh &\n" +
			"crew spawn t3 --tmux crew -- codex",
		ArgsUsage: "TASK -- CMD [ARGS...]",
		Flags: []cli.Flag{runFlag,
			&cli.StringFlag{Name: "tmux", Usage: "run the worker in a new window of tmux session `SESSION`, named after the task, and return once it started"},
			&cli.IntFlag{Name: "retries", Usage: "start the worker again up to `N` times when it exits before its task ended"},
			&cli.BoolFlag{Name: "close-window", Usage: "with --tmux: close the worker's window as soon as it exits (default: the window stays open, showing how the worker ended, until the run ends)"},
			&cli.StringFlag{Name: "grace", Usage: "when the worker is stopped (its task ended by the leader, crew run stop), SIGKILL it `DURATION` after SIGTERM", Value: "10s"},
		},
		Action: spawn,
	}
}

func spawn(c *cli.Context) error {
	e := newEnv(c)
	args := c.Args().Slice()
	if len(args) < 2 {
		return fmt.Errorf("spawn takes a task id and the command to run: crew spawn TASK -- CMD [ARGS...]: %w", crew.ErrInvalid)
	}
	id, command := args[0], args[1:]
	if err := crew.ValidateID("task", id); err != nil {
		return err
	}
	r, err := e.run()
	if err != nil {
		return err
	}
	if s := c.String("tmux"); s != "" && os.Getenv(tmuxEnv) == "" {
		return spawnTmux(e, r, id, s, command)
	}
	grace, err := duration(c.String("grace"))
	if err != nil {
		return err
	}
	o := supervise.SpawnOptions{Task: id, Command: command, Retries: c.Int("retries"), Grace: grace, Env: e.storeEnv(r.Root()),
		Started: func(w *state.Worker) {
			e.warn(fmt.Errorf("task %s, attempt %d: worker pid %d started; its output goes to %s", id, w.Attempt, w.PID, w.Log))
		}}
	if window := os.Getenv(tmuxEnv); window != "" {
		if err := pipePane(r, id); err != nil {
			return err
		}
		o.Terminal, o.Tmux = true, window
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGHUP) // a closed tmux window, a lost terminal
	defer stop()
	x, err := supervise.Spawn(ctx, r, o)
	if x != nil {
		e.warn(fmt.Errorf("task %s, attempt %d: worker %s", id, x.Attempt, x.Describe()))
	}
	if o.Terminal && x != nil && !c.Bool("close-window") && ctx.Err() == nil {
		keepWindow(ctx, e, r)
	}
	if err != nil || x == nil || x.Success() {
		return err
	}
	return cli.Exit("", workerStatus(x))
}

// keepWindow keeps the tmux window of a worker that has exited open
// until run r ends (or ctx: Ctrl-C in the window, the window closed),
// so that how the worker ended stays on screen; what it says from now
// on is not the worker's, so tmux stops copying it into the worker log.
func keepWindow(ctx context.Context, e *env, r *run.Run) {
	exec.Command("tmux", "pipe-pane", "-t", os.Getenv("TMUX_PANE")).Run()
	fmt.Fprintf(e.stderr, "crew: this window stays open until run %s ends; Ctrl-C closes it\n", r.ID())
	if err := supervise.WaitEnded(ctx, r); err != nil && ctx.Err() == nil {
		e.warn(err)
	}
}

// workerStatus is crew spawn's exit code for a worker that did not exit
// 0: its exit status, 128+N for signal N (as shells report it), or 1.
func workerStatus(x *state.WorkerExit) int {
	if x.Code != nil {
		return *x.Code
	}
	for n := 1; n < 65; n++ {
		if syscall.Signal(n).String() == x.Signal {
			return 128 + n
		}
	}
	return 1
}

// spawnTmux is crew spawn --tmux SESSION: it starts, in a new window of
// the session named after the task, a crew spawn that runs the worker on
// the window's terminal, and waits until that one has recorded the
// worker's start (or ended without starting it).
func spawnTmux(e *env, r *run.Run, id, session string, command []string) error {
	if _, err := exec.LookPath("tmux"); err != nil {
		return fmt.Errorf("--tmux: tmux is not installed (%v): %w", err, crew.ErrInvalid)
	}
	t, err := supervise.CheckSpawn(e.c.Context, r, id)
	if err != nil {
		return err
	}
	before := len(t.Workers)
	self, err := selfPath()
	if err != nil {
		return err
	}
	window := session + ":" + id
	tmuxArgs := []string{"new-window", "-d", "-P", "-F", "#{pane_pid}", "-t", session + ":", "-n", id}
	for _, kv := range append(append(os.Environ(), e.storeEnv(r.Root())...), tmuxEnv+"="+window, "CREW_RUN="+r.ID()) {
		if name, _, _ := strings.Cut(kv, "="); name != "TMUX" && name != "TMUX_PANE" {
			tmuxArgs = append(tmuxArgs, "-e", kv)
		}
	}
	tmuxArgs = append(tmuxArgs, "--", self, "spawn", id, "--run", r.ID(), "--retries", fmt.Sprint(e.c.Int("retries")), "--grace", e.c.String("grace"), "--close-window="+fmt.Sprint(e.c.Bool("close-window")), "--")
	if err := exec.Command("tmux", "list-sessions").Run(); err != nil {
		// No server (tmux new-window would try to start one and fail,
		// in words that do not say so).
		return fmt.Errorf("--tmux %s: no tmux server is running, so there is no session %s to open the worker's window in; start one (tmux new-session -d -s %s), or leave out --tmux: %w", session, session, session, crew.ErrInvalid)
	}
	out, err := exec.Command("tmux", append(tmuxArgs, command...)...).CombinedOutput()
	if err != nil {
		return tmuxRefused(session, err, string(out))
	}
	var panePID int
	fmt.Sscan(string(out), &panePID)
	w, err := supervise.AwaitStart(e.c.Context, r, id, before, panePID)
	if err != nil {
		return err
	}
	return e.emit(w, fmt.Sprintf("task %s: worker pid %d started in tmux window %s; its output goes to %s", id, w.PID, window, w.Log))
}

// tmuxRefused is the error of a tmux new-window that failed with err and
// output out: crew.ErrInvalid, saying what a person can do when the
// session does not exist, else in tmux's own words.
func tmuxRefused(session string, err error, out string) error {
	out = strings.TrimSpace(out)
	if strings.Contains(out, "can't find session") || strings.Contains(out, "can not find session") {
		return fmt.Errorf("--tmux %s: tmux has no session %s (tmux list-sessions lists them; tmux new-session -d -s %s makes it): %w", session, session, session, crew.ErrInvalid)
	}
	return fmt.Errorf("tmux new-window in session %s: %v: %s: %w", session, err, out, crew.ErrInvalid)
}

// pipePane has tmux copy what the worker's window shows into its log
// (tmux pipe-pane), so that crew task logs and the exit's tail have it.
func pipePane(r *run.Run, id string) error {
	log, err := supervise.WorkerLog(r, id)
	if err != nil {
		return err
	}
	out, err := exec.Command("tmux", "pipe-pane", "-t", os.Getenv("TMUX_PANE"), "cat >> "+shellQuote(log)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("tmux pipe-pane: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// selfPath is the path of the running crew, for tmux to start it again:
// the command it was started as (a link named crew stays crew), made
// absolute, else the executable.
func selfPath() (string, error) {
	if p, err := exec.LookPath(os.Args[0]); err == nil {
		return filepath.Abs(p)
	}
	return os.Executable()
}

func taskLogsCommand() *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "print the output of the task's supervised workers (crew spawn), every attempt",
		UsageText: "crew task logs t1\ncrew task logs t1 --follow",
		ArgsUsage: "[TASK]",
		Flags:     []cli.Flag{runFlag, taskFlag, followFlag},
		Action:    taskLogs,
	}
}

func taskLogs(c *cli.Context) error {
	e := newEnv(c)
	r, id, err := e.taskRun()
	if err != nil {
		return err
	}
	st, err := r.TaskState()
	if err != nil {
		return err
	}
	t, err := st.Task(id)
	if err != nil {
		return err
	}
	path, err := supervise.WorkerLog(r, t.ID)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		if len(t.Workers) > 0 && t.Workers[len(t.Workers)-1].Log != path {
			w := t.Workers[len(t.Workers)-1]
			return fmt.Errorf("task %s's worker ran on %s, which keeps its log in %s: %w", t.ID, w.Host, w.Log, crew.ErrNotFound)
		}
		if !c.Bool("follow") {
			return fmt.Errorf("task %s has no worker log: no worker was started for it with crew spawn: %w", t.ID, crew.ErrNotFound)
		}
	} else if err != nil {
		return err
	} else {
		defer f.Close()
	}
	return followFile(c.Context, f, path, e.stdout, c.Bool("follow"))
}

// followFile copies f (nil: path does not exist yet) to out; with follow
// it goes on copying what is appended, woken by fsnotify, until ctx ends.
func followFile(ctx context.Context, f *os.File, path string, out io.Writer, follow bool) error {
	if f != nil {
		if _, err := io.Copy(out, f); err != nil || !follow {
			return err
		}
	}
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer watcher.Close()
	if err := watcher.Add(filepath.Dir(path)); err != nil {
		return err
	}
	for {
		if f == nil {
			if f, err = os.Open(path); err == nil {
				defer f.Close()
			}
		}
		if f != nil {
			if _, err := io.Copy(out, f); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-watcher.Events:
		case err := <-watcher.Errors:
			return err
		}
	}
}

func heartbeatCommand() *cli.Command {
	return &cli.Command{
		Name:      "heartbeat",
		Usage:     "say that the task's worker is alive, without writing to the log (worker)",
		UsageText: "CREW_TASK=t1 crew heartbeat\nwhile sleep 60; do crew heartbeat; done &",
		Flags:     []cli.Flag{runFlag, taskFlag},
		Action:    heartbeat,
	}
}

func heartbeat(c *cli.Context) error {
	e := newEnv(c)
	if c.Args().Len() > 0 {
		return fmt.Errorf("heartbeat takes no arguments (the task is --task or CREW_TASK): %w", crew.ErrInvalid)
	}
	beat, err := e.app().Heartbeat(c.Context, app.Heartbeat{})
	if err != nil {
		return err
	}
	return e.emit(beat, "")
}
