package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/crew-dev/crew"
	reports "github.com/crew-dev/crew/report"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

func initCommand() *cli.Command {
	return &cli.Command{
		Name:      "init",
		Usage:     "create a .crew state root in the working directory (or --dir)",
		UsageText: "crew init\ncrew init --dir /tmp/crew-state",
		Action: func(c *cli.Context) error {
			e := newEnv(c)
			if err := e.fileOnly("init", "runs and mail live on the server, which needs no initialising (crew run create makes a run there)"); err != nil {
				return err
			}
			dir := c.String("dir")
			if dir == "" {
				dir = "."
			}
			// Like git init DIR: a directory that does not exist yet is
			// created (with the umask's modes; .crew itself gets crew's,
			// also when DIR names it).
			parent := dir
			if filepath.Base(dir) == run.DirName {
				parent = filepath.Dir(dir)
			}
			if err := os.MkdirAll(parent, 0o777); err != nil {
				return err
			}
			_, statErr := os.Stat(filepath.Join(dir, run.DirName))
			root, err := run.Init(dir, e.perm())
			if err != nil {
				return err
			}
			msg := "initialised crew state root in " + root.Dir
			if statErr == nil {
				msg = "crew state root already exists in " + root.Dir + "; nothing changed"
			}
			return e.emit(map[string]string{"dir": root.Dir}, msg)
		},
	}
}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "create, list, show, wait for and report on runs",
		UsageText: "crew run create --id r1 --title \"fix the build\"\ncrew run list\ncrew run wait r1 --timeout 30m",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "create a run and print its id",
				UsageText: "crew run create --id r1 --title \"fix the build\" --leader lead",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "id", Usage: "run `ID` (default: generated, sortable by creation time)"},
					&cli.StringFlag{Name: "title", Usage: "a one-line `TITLE`"},
					&cli.StringFlag{Name: "leader", Usage: "leader agent `NAME`", Value: "leader"},
				},
				Action: func(c *cli.Context) error {
					e := newEnv(c)
					if c.Args().Len() > 0 {
						return fmt.Errorf("run create takes no arguments (use --id): %w", crew.ErrInvalid)
					}
					if c.IsSet("id") {
						// An empty --id is a mistake (an unset variable), not a
						// request for a generated id.
						if err := crew.ValidateID("run", c.String("id")); err != nil {
							return err
						}
					}
					root, err := e.root()
					if err != nil {
						return err
					}
					r, err := root.Create(run.CreateOptions{ID: c.String("id"), Title: c.String("title"), Leader: c.String("leader")})
					if err != nil {
						return err
					}
					return e.emit(r.Manifest, r.ID())
				},
			},
			{
				Name:      "list",
				Usage:     "list runs, oldest first",
				UsageText: "crew run list\ncrew run list --json | jq -r .id",
				Action: func(c *cli.Context) error {
					e := newEnv(c)
					root, err := e.root()
					if err != nil {
						return err
					}
					runs, bad, err := root.List()
					if err != nil {
						return err
					}
					for _, m := range runs {
						r, err := root.Open(m.ID)
						if err != nil {
							return err
						}
						st, err := r.TaskState()
						if err != nil {
							return err
						}
						sum := summary(st)
						if err := e.emit(runRecord{Manifest: m, Tasks: len(st.Tasks), Summary: sum},
							fmt.Sprintf("%-28s %-40s %s", m.ID, escape(m.Title), sum)); err != nil {
							return err
						}
						if err := st.Err(); err != nil {
							bad = append(bad, fmt.Errorf("run %s: %w", m.ID, err))
						}
					}
					for _, b := range bad {
						fmt.Fprintf(e.stderr, "crew: %s\n", escape(b.Error()))
					}
					if len(bad) > 0 {
						return fmt.Errorf("%d runs could not be read: %w", len(bad), crew.ErrDamaged)
					}
					return nil
				},
			},
			{
				Name:      "show",
				Usage:     "show a run and its tasks",
				UsageText: "crew run show r1\ncrew run show --json",
				ArgsUsage: "[RUN]",
				Flags:     []cli.Flag{runFlag},
				Action: func(c *cli.Context) error {
					e := newEnv(c)
					r, err := e.runArg()
					if err != nil {
						return err
					}
					st, err := r.TaskState()
					if err != nil {
						return err
					}
					m := r.Manifest
					if e.json {
						if err := e.emit(runRecord{Manifest: m, Tasks: len(st.Tasks), Summary: summary(st), TaskList: st.TaskList(), Seq: st.Seq}, ""); err != nil {
							return err
						}
						return st.Err()
					}
					fmt.Fprintf(e.stdout, "run      %s\ntitle    %s\nleader   %s\ncreated  %s\ndir      %s\nevents   %d\nstatus   %s\n\n",
						m.ID, escape(m.Title), m.Leader, m.CreatedAt, escape(m.Dir), st.Seq, summary(st))
					printTasks(e, st.TaskList())
					return st.Err()
				},
			},
			{
				Name:  "wait",
				Usage: "block until every task has ended: exit 0 if all completed, 6 if any failed or was cancelled, 5 on timeout",
				UsageText: "crew run wait r1 --timeout 30m\n" +
					"crew run wait && echo all done",
				ArgsUsage: "[RUN]",
				Flags: []cli.Flag{runFlag,
					&cli.StringFlag{Name: "timeout", Usage: "give up after `DURATION` (e.g. 30s, 10m); default: wait forever"},
				},
				Action: runWait,
			},
			reportCommand(),
		},
	}
}

type runRecord struct {
	state.Manifest
	Tasks    int           `json:"tasks"`
	Summary  string        `json:"summary"`
	Seq      int64         `json:"seq,omitempty"`
	TaskList []*state.Task `json:"taskList,omitempty"`
}

// summary is a one-line count of task states: "3/5 done · 1 waiting".
func summary(st *state.State) string { return reports.Summary(st) }

// progressLine is the run's summary and what the oldest open question
// asks: `3/5 done · 1 waiting: t2 asks "Which DB?"`, with "(+N more)" when
// several tasks wait. waiting is run.Pending's list, oldest first.
func progressLine(st *state.State, waiting []run.Waiting) string {
	line := summary(st)
	if len(waiting) > 0 {
		w := waiting[0]
		line += fmt.Sprintf(": %s asks %q", w.Task.ID, shorten(strings.Join(strings.Fields(w.Question.Body), " "), 60))
		if len(waiting) > 1 {
			line += fmt.Sprintf(" (+%d more)", len(waiting)-1)
		}
	}
	return line
}

// waitingKey names the open questions of st, to tell when they change.
func waitingKey(st *state.State) string {
	var qs []string
	for _, t := range st.TaskList() {
		if t.Status == task.Waiting {
			qs = append(qs, t.Question)
		}
	}
	return strings.Join(qs, ",")
}

// fit cuts a progress line to a terminal's width, so that "\r" can
// redraw it (a line that wraps cannot be redrawn).
func fit(line string, width int) string {
	if width <= 1 {
		return line
	}
	return shorten(line, width-1)
}

func runWait(c *cli.Context) error {
	e := newEnv(c)
	r, err := e.runArg()
	if err != nil {
		return err
	}
	ctx, cancel, err := withTimeout(c)
	if err != nil {
		return err
	}
	defer cancel()
	tty, width := false, 0
	if f, ok := e.stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
		width, _, _ = term.GetSize(int(f.Fd()))
	}
	var last, lastKey string
	var lastAt time.Time
	var waiting []run.Waiting
	progress := func(st *state.State) {
		if key := waitingKey(st); key != lastKey {
			// Read the questions' bodies only when the open ones change.
			waiting, lastKey = nil, key
			if key != "" {
				if p, err := r.Pending(run.Leader); p != nil && err == nil {
					waiting = p.Waiting
				}
			}
		}
		line := progressLine(st, waiting)
		switch {
		case tty:
			fmt.Fprintf(e.stderr, "\r\x1b[K%s", fit(escape(line), width))
		case line != last || time.Since(lastAt) > 30*time.Second:
			fmt.Fprintf(e.stderr, "crew: run %s: %s\n", r.ID(), escape(line))
		default:
			return
		}
		last, lastAt = line, time.Now()
	}
	err = r.WaitRun(ctx, progress)
	if tty {
		fmt.Fprintln(e.stderr)
	}
	st, serr := r.TaskState()
	if serr == nil {
		e.emit(runRecord{Manifest: r.Manifest, Tasks: len(st.Tasks), Summary: summary(st), TaskList: st.TaskList(), Seq: st.Seq}, summary(st))
	}
	return err
}
