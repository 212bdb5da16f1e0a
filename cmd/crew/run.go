// crew run create, list, show, wait and report: the runs of a state root.

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	reports "github.com/crew-dev/crew/report"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/supervise"
	"github.com/crew-dev/crew/task"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "create, list, show, wait for and report on runs",
		UsageText: "crew run create --id r1 --title \"fix the build\"\ncrew run list\ncrew run wait r1 --timeout 30m",
		Subcommands: []*cli.Command{
			runCreateCommand(), runListCommand(), runShowCommand(), runWaitCommand(), runReportCommand(),
		},
	}
}

// runRecord is a run as run list, show and wait print it with --json.
type runRecord struct {
	state.Manifest
	TaskCount int           `json:"taskCount"`
	Summary   string        `json:"summary"`
	Seq       int64         `json:"seq,omitempty"`
	Tasks     []*state.Task `json:"tasks,omitempty"` // as run report's "tasks"
}

// fullRecord is the record of a run with its tasks and last seq (run
// list's leaves them out).
func fullRecord(m state.Manifest, st *state.State) runRecord {
	return runRecord{Manifest: m, TaskCount: len(st.Tasks), Summary: summary(st), Tasks: st.TaskList(), Seq: st.Seq}
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
	root, err := e.root()
	if err != nil {
		return err
	}
	runs, bad, err := root.List()
	if err != nil {
		return err
	}
	// Runs that cannot be opened are listed too, saying why, in order of
	// creation where their logs still tell it, else last (docs/cli.md).
	var all []*run.BadRun // the runs, good ones with no Err
	manifests := map[string]state.Manifest{}
	for _, m := range runs {
		manifests[m.ID] = m
		all = append(all, &run.BadRun{ID: m.ID, CreatedAt: m.CreatedAt})
	}
	for _, b := range bad {
		all = append(all, b.(*run.BadRun))
	}
	slices.SortStableFunc(all, func(a, b *run.BadRun) int {
		switch {
		case a.CreatedAt.IsZero() && !b.CreatedAt.IsZero():
			return 1 // age unknown: last
		case !a.CreatedAt.IsZero() && b.CreatedAt.IsZero():
			return -1
		}
		return a.CreatedAt.Compare(b.CreatedAt.Time)
	})
	var failed []error
	for _, br := range all {
		if br.Err == nil {
			st, err := runState(root, br.ID)
			if err == nil {
				if err := emitRun(e, manifests[br.ID], st); err != nil {
					return err
				}
				if err := st.Err(); err != nil {
					failed = append(failed, fmt.Errorf("run %s: %w", br.ID, err))
				}
				continue
			}
			br.Err = err
		}
		msg := message(br.Err)
		rec := map[string]any{"id": br.ID, "damaged": msg}
		if !br.CreatedAt.IsZero() {
			rec["createdAt"] = br.CreatedAt
		}
		if err := e.emit(rec, fmt.Sprintf("%-28s %-40s cannot be opened: %s", br.ID, "", human.Line(msg))); err != nil {
			return err
		}
		failed = append(failed, br)
	}
	for _, b := range failed {
		e.warn(b)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s could not be read: %w", human.Count(len(failed), "run"), worstClass(failed))
	}
	return nil
}

// emitRun prints the line of crew run list of run m, whose state is st.
func emitRun(e *env, m state.Manifest, st *state.State) error {
	sum := summary(st)
	return e.emit(runRecord{Manifest: m, TaskCount: len(st.Tasks), Summary: sum},
		fmt.Sprintf("%-28s %-40s %s", m.ID, human.Line(m.Title), sum))
}

// runState opens run id and reads its tasks.
func runState(root *run.Root, id string) (*state.State, error) {
	r, err := root.Open(id)
	if err != nil {
		return nil, err
	}
	return r.TaskState()
}

// worstClass is the sentinel a listing that met errs ends with:
// crew.ErrTampered if any of them was a tampered state root, else
// crew.ErrDamaged.
func worstClass(errs []error) error {
	for _, err := range errs {
		if errors.Is(err, crew.ErrTampered) {
			return crew.ErrTampered
		}
	}
	return crew.ErrDamaged
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
	r, err := e.runArg()
	if err != nil {
		return err
	}
	st, live, err := e.tasksAlive(r)
	if err != nil {
		return err
	}
	m := r.Manifest
	if e.json {
		if err := e.emit(fullRecord(m, st), ""); err != nil {
			return err
		}
		return st.Err()
	}
	fmt.Fprintf(e.stdout, "run      %s\ntitle    %s\nleader   %s\ncreated  %s\ndir      %s\nevents   %d\nstatus   %s\n\n",
		m.ID, human.Line(m.Title), m.Leader, m.CreatedAt, human.Escape(m.Dir), st.Seq, summary(st))
	printTasks(e, st.TaskList(), live)
	return st.Err()
}

func runWaitCommand() *cli.Command {
	return &cli.Command{
		Name:  "wait",
		Usage: "block until every task has ended: exit 0 if all completed (or the run has no task), 6 if any failed or was cancelled, 5 on timeout, 7 on a damaged log",
		UsageText: "crew run wait r1 --timeout 30m\n" +
			"crew run wait && echo all done",
		ArgsUsage: "[RUN]",
		Flags: []cli.Flag{runFlag, quietAfterFlag, nudgeAfterFlag,
			&cli.StringFlag{Name: "timeout", Usage: "give up after `DURATION` (e.g. 30s, 10m); default: wait forever"},
		},
		Action: runWait,
	}
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
	o, err := e.waitOptions()
	if err != nil {
		return err
	}
	p := newProgress(e, r)
	o.Progress, o.Failed = p.show, p.failed
	err = supervise.WaitRunWith(ctx, r, o)
	if p.tty {
		fmt.Fprintln(e.stderr)
	}
	st, serr := r.TaskState()
	if serr == nil {
		e.emit(fullRecord(r.Manifest, st), summary(st))
		if err == nil && len(st.Tasks) == 0 {
			e.warn(fmt.Errorf("run %s has no tasks: nothing to wait for", r.ID()))
		}
	}
	return err
}

// progress shows run wait's progress on stderr: one line redrawn on a
// terminal, else a line when it changes (and every 30s at the most while
// it does not).
type progress struct {
	e       *env
	r       *run.Run
	tty     bool
	width   int
	last    string
	lastAt  time.Time
	key     string           // waitingKey of the questions in waiting
	waiting []events.Message // the open questions, oldest first
}

func newProgress(e *env, r *run.Run) *progress {
	p := &progress{e: e, r: r}
	if f, ok := e.stderr.(*os.File); ok {
		p.tty = term.IsTerminal(int(f.Fd()))
		p.width, _, _ = term.GetSize(int(f.Fd()))
	}
	return p
}

// waitOptions reads --quiet-after and --nudge-after (run wait, watch).
func (e *env) waitOptions() (supervise.WaitOptions, error) {
	var o supervise.WaitOptions
	var err error
	if o.QuietAfter, err = e.quietAfter(); err != nil {
		return o, err
	}
	if s := e.c.String("nudge-after"); s != "" {
		if o.NudgeAfter, err = duration(s); err != nil {
			return o, err
		}
	}
	return o, nil
}

// nudgeAfterFlag is the --nudge-after of run wait and watch.
var nudgeAfterFlag = &cli.StringFlag{Name: "nudge-after", Usage: "nudge a running task whose worker shows no sign of life for `DURATION`, once per quiet spell"}

// show is supervise.WaitRunWith's callback: it prints the progress of st and
// live.
func (p *progress) show(st *state.State, live map[string]*run.Liveness) {
	if key := waitingKey(st); key != p.key {
		// Read the questions' bodies only when the open ones change.
		p.waiting, p.key = nil, key
		if key != "" {
			if pend, err := p.r.Pending(run.Leader); pend != nil && err == nil {
				p.waiting = questions(pend)
			}
		}
	}
	line := progressLine(st, p.waiting) + livenessLine(st, live)
	switch {
	case p.tty:
		fmt.Fprintf(p.e.stderr, "\r\x1b[K%s", fit(human.Escape(line), p.width))
	case line != p.last || time.Since(p.lastAt) > 30*time.Second:
		fmt.Fprintf(p.e.stderr, "crew: run %s: %s\n", p.r.ID(), human.Escape(line))
	default:
		return
	}
	p.last, p.lastAt = line, time.Now()
}

// failed is supervise.WaitRunWith's callback for a task failure: one line
// in the progress stream, as it happens ("t2 failed: disk full", the
// first line of the reason), above the progress line on a terminal.
func (p *progress) failed(t *state.Task) {
	line := t.ID + " failed"
	if why, _, _ := strings.Cut(t.Reason, "\n"); why != "" {
		line += ": " + why
	}
	if p.tty {
		fmt.Fprintf(p.e.stderr, "\r\x1b[K")
		p.last = "" // the progress line is drawn again below it
	}
	fmt.Fprintf(p.e.stderr, "crew: run %s: %s\n", p.r.ID(), human.Escape(line))
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
	r, err := e.runArg()
	if err != nil {
		return err
	}
	w := bufio.NewWriter(e.stdout)
	err = reports.Render(w, r, format)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}
