// crew run create, list, show, wait and report: the runs of a state root.

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	reports "github.com/crew-dev/crew/report"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "create, list, show, wait for and report on runs",
		UsageText: "crew run create --id r1 --title \"fix the build\"\ncrew run list\ncrew run wait r1 --timeout 30m",
		Subcommands: []*cli.Command{
			runCreateCommand(), runListCommand(), runShowCommand(), runWaitCommand(), runStopCommand(), runReportCommand(),
		},
	}
}

func runCreateCommand() *cli.Command {
	return &cli.Command{
		Name:      "create",
		Usage:     "create a run and print its id",
		UsageText: "crew run create --id r1 --title \"fix the build\" --leader lead",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "id", Usage: "run `ID` (default: generated, sortable by creation time)"},
			&cli.StringFlag{Name: "title", Usage: "a one-line `TITLE` (no line breaks)"},
			&cli.StringFlag{Name: "leader", Usage: "leader agent `NAME`", Value: "leader"},
		},
		Action: runCreate,
	}
}

func runCreate(c *cli.Context) error {
	e := newEnv(c)
	if c.Args().Len() > 0 {
		return fmt.Errorf("run create takes no arguments (use --id): %w", crew.ErrInvalid)
	}
	m, err := e.app().RunCreate(c.Context, app.RunCreate{ID: c.String("id"), IDSet: c.IsSet("id"), Title: c.String("title"), Leader: c.String("leader")})
	if err != nil {
		return err
	}
	return e.emit(m, m.ID)
}

func runListCommand() *cli.Command {
	return &cli.Command{
		Name:      "list",
		Usage:     "list runs, oldest first",
		UsageText: "crew run list\ncrew run list --json | jq -r .id",
		Action:    runList,
	}
}

func runList(c *cli.Context) error {
	e := newEnv(c)
	runs, err := e.app().RunList(c.Context, app.RunList{})
	if !e.json && err == nil && len(runs) == 0 {
		fmt.Fprintln(e.stderr, "crew: no runs yet; create one with crew run create")
	}
	if !e.json && len(runs) > 0 {
		fmt.Fprintf(e.stdout, "%-28s %-40s %s\n", "RUN", "TITLE", "STATUS")
	}
	for _, l := range runs {
		var text string
		if l.Run != nil {
			text = fmt.Sprintf("%-28s %-40s %s", l.Run.ID, human.Line(l.Run.Title), l.Run.Summary)
		} else {
			text = fmt.Sprintf("%-28s %-40s cannot be opened: %s", l.Bad.ID, "", human.Line(l.Bad.Damaged))
		}
		if perr := e.emit(l.Record(), text); perr != nil {
			return perr
		}
	}
	return e.unreadable(err)
}

// unreadable warns of each thing an *app.Unreadable err could not read
// (a run, a mail file), and returns err.
func (e *env) unreadable(err error) error {
	if u := (*app.Unreadable)(nil); errors.As(err, &u) {
		for _, b := range u.Errs {
			e.warn(b)
		}
	}
	return err
}

func runShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show a run and its tasks",
		UsageText: "crew run show r1\ncrew run show --json",
		ArgsUsage: "[RUN]",
		Flags:     []cli.Flag{runFlag},
		Action:    runShow,
	}
}

func runShow(c *cli.Context) error {
	e := newEnv(c)
	id, err := e.runArg()
	if err != nil {
		return err
	}
	rec, err := e.app().RunShow(c.Context, app.RunShow{Run: id, QuietAfter: c.String("quiet-after")})
	if rec == nil {
		return err
	}
	if e.json {
		if perr := e.emit(rec, ""); perr != nil {
			return perr
		}
		return err
	}
	fmt.Fprintf(e.stdout, "run      %s\ntitle    %s\nleader   %s\ncreated  %s\ndir      %s\nevents   %d\nstatus   %s\n\n",
		rec.ID, human.Line(rec.Title), rec.Leader, rec.CreatedAt, human.Escape(rec.Dir), rec.Seq, rec.Summary)
	printTasks(e, rec.TaskRecords())
	return err
}

func runWaitCommand() *cli.Command {
	return &cli.Command{
		Name:  "wait",
		Usage: "block until every task has ended: exit 0 if all completed, 6 if any failed or was cancelled, 5 on timeout, 7 on a damaged log (the whole log is read before the verdict), 3 if the run has no tasks (unless --allow-empty)",
		UsageText: "crew run wait r1 --timeout 30m\n" +
			"crew run wait && echo all done",
		ArgsUsage: "[RUN]",
		Flags: []cli.Flag{runFlag, quietAfterFlag, nudgeAfterFlag,
			&cli.StringFlag{Name: "timeout", Usage: "give up after `DURATION` (e.g. 30s, 10m); default: wait forever"},
			&cli.BoolFlag{Name: "allow-empty", Usage: "a run with no tasks is a success (exit 0), not exit 3"},
			&cli.BoolFlag{Name: "stop", Usage: "when the timeout comes (or on Ctrl-C), stop the run as crew run stop does before exiting, so that no worker outlives the job"},
		},
		Action: runWait,
	}
}

func runWait(c *cli.Context) error {
	e := newEnv(c)
	id, err := e.runArg()
	if err != nil {
		return err
	}
	p := newProgress(e)
	rec, err := e.app().RunWait(c.Context, app.RunWait{Run: id, Timeout: c.String("timeout"), QuietAfter: c.String("quiet-after"),
		NudgeAfter: c.String("nudge-after"), AllowEmpty: c.Bool("allow-empty"), Stop: c.Bool("stop")}, p.show)
	if p.tty {
		fmt.Fprintln(e.stderr)
	}
	if rec != nil {
		e.emit(rec, rec.Summary)
		if rec.Stopped != nil && !e.json {
			printStopped(e, e.stderr, rec.Stopped)
		}
	}
	return err
}

func runStopCommand() *cli.Command {
	return &cli.Command{
		Name: "stop",
		Usage: "end a run's work: cancel every task that has not ended and stop every worker of the run (each crew spawn sends its worker SIGTERM, " +
			"then SIGKILL after its --grace); waits until the workers' exits are recorded: exit 5 if some still run",
		UsageText: "crew run stop r1\ncrew run stop --reason \"the build is fixed\"",
		ArgsUsage: "[RUN]",
		Flags:     []cli.Flag{runFlag, asFlag, &cli.StringFlag{Name: "reason", Usage: "why, in `TEXT`, recorded in each task it cancels (default: run stopped)"}},
		Action:    runStop,
	}
}

func runStop(c *cli.Context) error {
	e := newEnv(c)
	id, err := e.runArg()
	if err != nil {
		return err
	}
	rec, err := e.app().RunStop(c.Context, app.RunStop{Run: id, Reason: c.String("reason")})
	if rec != nil {
		if e.json {
			e.emit(rec, "")
		} else {
			printStopped(e, e.stdout, rec)
		}
	}
	return err
}

// printStopped prints what run stop did to w: a line per task it
// cancelled and per worker it had stopped.
func printStopped(e *env, w io.Writer, rec *app.RunStopped) {
	for _, id := range rec.Cancelled {
		fmt.Fprintf(w, "%s cancelled\n", id)
	}
	for _, sw := range rec.Workers {
		how := "still runs"
		if sw.Exit != nil {
			how = sw.Exit.Describe()
		}
		fmt.Fprintf(w, "%s: worker pid %d on %s %s\n", sw.Task, sw.PID, human.Escape(sw.Host), human.Escape(how))
	}
	if len(rec.Cancelled) == 0 && len(rec.Workers) == 0 {
		fmt.Fprintf(w, "run %s: nothing to stop: every task has ended and no worker runs\n", rec.Run)
	}
}

// progress shows run wait's progress on stderr: one line redrawn on a
// terminal, else a line when it changes (and every 30s at the most while
// it does not).
type progress struct {
	e      *env
	tty    bool
	width  int
	last   string
	lastAt time.Time
}

func newProgress(e *env) *progress {
	p := &progress{e: e}
	if f, ok := e.stderr.(*os.File); ok {
		p.tty = term.IsTerminal(int(f.Fd()))
		p.width, _, _ = term.GetSize(int(f.Fd()))
	}
	return p
}

// nudgeAfterFlag is the --nudge-after of run wait and watch.
var nudgeAfterFlag = &cli.StringFlag{Name: "nudge-after", Usage: "nudge a running task whose worker shows no sign of life for `DURATION`, once per quiet spell"}

// show is app.RunWait's progress callback: it prints each failure the
// wait has just seen on a line of its own ("crew: run r1: t2 failed:
// disk full", the first line of the reason), then the run's progress.
func (p *progress) show(pr app.Progress) {
	for _, t := range pr.Failed {
		line := t.ID + " failed"
		if why, _, _ := strings.Cut(t.Reason, "\n"); why != "" {
			line += ": " + why
		}
		if p.tty {
			fmt.Fprint(p.e.stderr, "\r\x1b[K") // above the progress line, drawn again below it
		}
		fmt.Fprintf(p.e.stderr, "crew: run %s: %s\n", pr.Run, human.Escape(line))
	}
	line := progressLine(pr.State, pr.Waiting) + livenessLine(pr.State, pr.Live)
	switch {
	case p.tty:
		fmt.Fprintf(p.e.stderr, "\r\x1b[K%s", fit(human.Escape(line), p.width))
	case line != p.last || time.Since(p.lastAt) > 30*time.Second:
		fmt.Fprintf(p.e.stderr, "crew: run %s: %s\n", pr.Run, human.Escape(line))
	default:
		return
	}
	p.last, p.lastAt = line, time.Now()
}

// summary is a one-line count of task states: "3/5 done · 1 waiting".
func summary(st *state.State) string { return reports.Summary(st) }

// progressLine is the run's summary and what the oldest open question
// asks: `3/5 done · 1 waiting: t2 asks "Which DB?"`, with "(+N more)" when
// several tasks wait. waiting is the open questions, oldest first.
func progressLine(st *state.State, waiting []events.Message) string {
	line := summary(st)
	if len(waiting) > 0 {
		w := waiting[0]
		line += fmt.Sprintf(": %s asks %q", w.Task, shorten(strings.Join(strings.Fields(w.Body), " "), 60))
		if len(waiting) > 1 {
			line += fmt.Sprintf(" (+%d more)", len(waiting)-1)
		}
	}
	return line
}

// livenessLine names the tasks that are quiet or dead: " · quiet: t3 ·
// dead: t4", or "".
func livenessLine(st *state.State, live map[string]*run.Liveness) string {
	var line string
	for _, state := range []string{run.LiveQuiet, run.LiveDead} {
		var ids []string
		for _, t := range st.TaskList() {
			if l := live[t.ID]; l != nil && l.State == state {
				ids = append(ids, t.ID)
			}
		}
		if len(ids) > 0 {
			line += fmt.Sprintf(" · %s: %s", state, strings.Join(ids, ", "))
		}
	}
	return line
}

// fit cuts a progress line to a terminal's width, so that "\r" can
// redraw it (a line that wraps cannot be redrawn).
func fit(line string, width int) string {
	if width <= 1 {
		return line
	}
	return shorten(line, width-1)
}

func runReportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "write a report of the run: markdown (job summary), junit (XML for test reporters), mermaid (sequence diagram) or json (the whole run)",
		UsageText: "crew run report r1 --format markdown >> \"$GITHUB_STEP_SUMMARY\"\n" +
			"crew run report --format junit > crew-junit.xml\n" +
			"crew run report --format mermaid\n" +
			"crew run report --format json | jq '.tasks[] | {id, status, seconds}'",
		ArgsUsage: "[RUN]",
		Flags: []cli.Flag{runFlag,
			&cli.StringFlag{Name: "format", Usage: "`FORMAT`: markdown, junit, mermaid or json (--json alone means json)", Value: reports.FormatMarkdown},
		},
		Action: runReport,
	}
}

func runReport(c *cli.Context) error {
	e := newEnv(c)
	format := c.String("format")
	if e.json && !c.IsSet("format") {
		format = reports.FormatJSON // --json asks for machine output
	}
	if err := reports.CheckFormat(format); err != nil {
		return err
	}
	id, err := e.runArg()
	if err != nil {
		return err
	}
	w := bufio.NewWriter(e.stdout)
	err = e.app().RunReport(c.Context, app.RunReport{Run: id, Format: format}, w)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}

// runArg is the run named by the first argument, "" for the identity's
// (--run / CREW_RUN, else the latest).
func (e *env) runArg() (string, error) {
	if e.c.Args().Len() > 1 {
		return "", fmt.Errorf("too many arguments: %q: %w", e.c.Args().Slice(), crew.ErrInvalid)
	}
	return e.c.Args().First(), nil
}
