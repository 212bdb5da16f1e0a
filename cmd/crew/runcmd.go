package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/task"
)

func initCommand() *cli.Command {
	return &cli.Command{
		Name:      "init",
		Usage:     "create a .crew state root in the working directory (or --dir)",
		UsageText: "crew init\n   crew init --dir /tmp/crew-state",
		Action: func(c *cli.Context) error {
			e := newEnv(c)
			dir := c.String("dir")
			if dir == "" {
				dir = "."
			}
			root, err := run.Init(dir, e.perm())
			if err != nil {
				return err
			}
			return e.emit(map[string]string{"dir": root.Dir}, "initialised crew state root in "+root.Dir)
		},
	}
}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "create, list, show, wait for and report on runs",
		UsageText: "crew run create --id r1 --title \"fix the build\"\n   crew run list\n   crew run wait r1 --timeout 30m",
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
				UsageText: "crew run list\n   crew run list --json | jq -r .id",
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
						st, err := r.State()
						if err != nil {
							return err
						}
						sum := summary(st)
						if err := e.emit(runRecord{Manifest: m, Tasks: len(st.Tasks), Summary: sum},
							fmt.Sprintf("%-28s %-40s %s", m.ID, escape(m.Title), sum)); err != nil {
							return err
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
				UsageText: "crew run show r1\n   crew run show --json",
				ArgsUsage: "[RUN]",
				Flags:     []cli.Flag{runFlag},
				Action: func(c *cli.Context) error {
					e := newEnv(c)
					r, err := e.runArg()
					if err != nil {
						return err
					}
					st, err := r.State()
					if err != nil {
						return err
					}
					m := r.Manifest
					if e.json {
						return e.emit(runRecord{Manifest: m, Tasks: len(st.Tasks), Summary: summary(st), TaskList: st.TaskList(), Seq: st.Seq}, "")
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
					"   crew run wait && echo all done",
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
	run.Manifest
	Tasks    int         `json:"tasks"`
	Summary  string      `json:"summary"`
	Seq      int64       `json:"seq,omitempty"`
	TaskList []*run.Task `json:"taskList,omitempty"`
}

// runArg opens the run named by the first argument, else --run / latest.
func (e *env) runArg() (*run.Run, error) {
	if e.c.Args().Len() > 1 {
		return nil, fmt.Errorf("too many arguments: %q: %w", e.c.Args().Slice(), crew.ErrInvalid)
	}
	if id := e.c.Args().First(); id != "" {
		root, err := e.root()
		if err != nil {
			return nil, err
		}
		return root.Open(id)
	}
	return e.run()
}

// summary is a one-line count of task states: "3/5 done · 1 waiting".
func summary(st *run.State) string {
	counts := map[task.State]int{}
	done := 0
	for _, t := range st.Tasks {
		counts[t.Status]++
		if t.Status.Terminal() {
			done++
		}
	}
	parts := []string{fmt.Sprintf("%d/%d done", done, len(st.Tasks))}
	for _, s := range task.States {
		if counts[s] > 0 && s != task.Completed {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	return strings.Join(parts, " · ")
}

// progressLine is summary plus what a waiting task asks.
func progressLine(st *run.State) string {
	line := summary(st)
	for _, t := range st.TaskList() {
		if t.Status == task.Waiting {
			line += fmt.Sprintf(": %s waits", t.ID)
			break
		}
	}
	return line
}

func runWait(c *cli.Context) error {
	e := newEnv(c)
	r, err := e.runArg()
	if err != nil {
		return err
	}
	ctx := c.Context
	if t := c.String("timeout"); t != "" {
		d, err := duration(t)
		if err != nil {
			return err
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	tty := false
	if f, ok := e.stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	var last string
	var lastAt time.Time
	progress := func(st *run.State) {
		line := progressLine(st)
		switch {
		case tty:
			fmt.Fprintf(e.stderr, "\r\x1b[K%s", line)
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
	st, serr := r.State()
	if serr == nil {
		e.emit(runRecord{Manifest: r.Manifest, Tasks: len(st.Tasks), Summary: summary(st), TaskList: st.TaskList(), Seq: st.Seq}, summary(st))
	}
	return err
}

func printTasks(e *env, ts []*run.Task) {
	fmt.Fprintf(e.stdout, "%-20s %-10s %-16s %s\n", "TASK", "STATUS", "AGENT", "TITLE")
	for _, t := range ts {
		fmt.Fprintf(e.stdout, "%-20s %-10s %-16s %s\n", t.ID, t.Status, t.Agent, escape(t.Title))
	}
}
