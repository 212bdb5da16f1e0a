// crew task add, list, show, verify, and the transitions start, complete,
// fail, cancel and retry: the tasks of a run.

package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

func taskCommand() *cli.Command {
	return &cli.Command{
		Name:      "task",
		Usage:     "add, list and move tasks through their states",
		UsageText: "crew task add t1 --title \"run go vet\" --agent vetter\ncrew task list\ncrew task complete t1",
		Subcommands: []*cli.Command{
			taskAddCommand(),
			taskListCommand(),
			taskShowCommand(),
			transitionCommand(task.Start, "start a pending task (worker)", "crew task start t1\nCREW_TASK=t1 crew task start"),
			transitionCommand(task.Complete, "complete a running task; runs its done-when check first, and refuses while follow-ups are unread (--force)", "crew task complete t1"),
			transitionCommand(task.Fail, "fail a task that has not ended", "crew task fail t1 --reason \"tests do not build\""),
			transitionCommand(task.Cancel, "cancel a task that has not ended (leader)", "crew task cancel t1 --reason \"not needed\""),
			transitionCommand(task.Retry, "put a failed or cancelled task back to pending (leader)", "crew task retry t1"),
			taskVerifyCommand(),
			taskLogsCommand(),
		},
	}
}

func taskAddCommand() *cli.Command {
	return &cli.Command{
		Name:      "add",
		Usage:     "add a pending task to the run",
		UsageText: "crew task add t1 --title \"run the tests\" --agent tester --done-when \"go test ./...\"",
		ArgsUsage: "ID",
		Flags: []cli.Flag{runFlag, asFlag,
			&cli.StringFlag{Name: "title", Usage: "a one-line `TITLE` (no line breaks)"},
			&cli.StringFlag{Name: "agent", Usage: "worker agent `NAME` (default: the task id)"},
			&cli.StringFlag{Name: "done-when", Usage: "shell `CMD` that must exit 0 before the task may complete"},
		},
		Action: taskAdd,
	}
}

func taskAdd(c *cli.Context) error {
	e := newEnv(c)
	if c.Args().Len() != 1 {
		return fmt.Errorf("task add takes one task id: %w", crew.ErrInvalid)
	}
	t, err := e.app().TaskAdd(c.Context, app.TaskAdd{ID: c.Args().First(), Title: c.String("title"), Agent: c.String("agent"), DoneWhen: c.String("done-when")})
	if err != nil {
		return err
	}
	return e.emit(t, fmt.Sprintf("%s added to run %s", t.ID, t.Run))
}

func taskListCommand() *cli.Command {
	return &cli.Command{
		Name:      "list",
		Usage:     "list the run's tasks",
		UsageText: "crew task list\ncrew task list --json | jq -r 'select(.status==\"waiting\") | .id'",
		Flags:     []cli.Flag{runFlag, quietAfterFlag},
		Action:    taskList,
	}
}

func taskList(c *cli.Context) error {
	e := newEnv(c)
	recs, err := e.app().TaskList(c.Context, app.TaskList{QuietAfter: c.String("quiet-after")})
	if recs == nil {
		return err
	}
	if e.json {
		for _, rec := range recs {
			if err := e.emit(rec, ""); err != nil {
				return err
			}
		}
	} else {
		printTasks(e, recs)
	}
	if err == nil {
		e.noteTaken()
	}
	return err
}

func taskShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show one task",
		UsageText: "crew task show t1\ncrew task show t1 --json",
		ArgsUsage: "[TASK]",
		Flags:     []cli.Flag{runFlag, taskFlag, quietAfterFlag, undeliveredAfterFlag},
		Action:    taskShow,
	}
}

func taskShow(c *cli.Context) error {
	e := newEnv(c)
	id, err := e.taskArg()
	if err != nil {
		return err
	}
	rec, err := e.app().TaskShow(c.Context, app.TaskShow{Task: id, QuietAfter: c.String("quiet-after"), UndeliveredAfter: c.String("undelivered-after")})
	if rec == nil {
		return err
	}
	if e.json {
		if perr := e.emit(rec, ""); perr != nil {
			return perr
		}
		return err
	}
	t := rec.Task
	fmt.Fprintf(e.stdout, "task       %s\ntitle      %s\nagent      %s\nstatus     %s\ncreated    %s\nupdated    %s\nquestions  %d\n",
		t.ID, human.Line(t.Title), t.Agent, t.Status, t.CreatedAt, t.UpdatedAt, t.Questions)
	if t.DoneWhen != "" {
		fmt.Fprintf(e.stdout, "done-when  %s\n", human.Escape(t.DoneWhen))
	}
	if t.Question != "" {
		text := t.Question
		if rec.QuestionText != "" {
			text += ": " + indent(rec.QuestionText, "           ")
		}
		fmt.Fprintf(e.stdout, "question   %s\n", text)
	}
	if l := rec.Liveness; l != nil {
		fmt.Fprintf(e.stdout, "liveness   %s\n", livenessText(l))
	}
	if t.Reason != "" {
		fmt.Fprintf(e.stdout, "reason     %s\n", indent(t.Reason, "           "))
	}
	for i := range rec.Undelivered {
		fmt.Fprintf(e.stdout, "undelivered %s\n", indent(undeliveredText(&rec.Undelivered[i]), "           "))
	}
	printWorkers(e, t.Workers)
	return err
}

// transitionCommand is the command that moves a task by op: its name is
// the op's (transition reads it back).
func transitionCommand(op task.Op, usage, example string) *cli.Command {
	flags := []cli.Flag{runFlag, taskFlag, asFlag}
	if op == task.Fail || op == task.Cancel || op == task.Retry {
		flags = append(flags, &cli.StringFlag{Name: "reason", Usage: "why, in `TEXT`"})
	}
	if op == task.Complete {
		flags = append(flags, &cli.StringFlag{Name: "done-timeout", Usage: "bound on the task's done-when check, a `DURATION`", Value: "10m"},
			&cli.BoolFlag{Name: "force", Usage: "complete even though the worker has not read follow-ups sent to it"})
	}
	return &cli.Command{
		Name:      string(op),
		Usage:     usage,
		UsageText: example,
		ArgsUsage: "[TASK]",
		Flags:     flags,
		Action:    transition,
	}
}

// transition is the action of task start, complete, fail, cancel and
// retry: the op is the command's name.
func transition(c *cli.Context) error {
	e := newEnv(c)
	id, err := e.taskArg()
	if err != nil {
		return err
	}
	a := e.app()
	move := app.TaskMove{Task: id, Reason: c.String("reason")}
	var t *app.TaskRecord
	switch task.Op(c.Command.Name) {
	case task.Start:
		t, err = a.TaskStart(c.Context, app.TaskRef{Task: id})
	case task.Complete:
		t, err = a.TaskComplete(c.Context, app.TaskComplete{Task: id, DoneTimeout: c.String("done-timeout"), Force: c.Bool("force")})
		if err == nil && t.DoneWhen != "" && !e.json {
			fmt.Fprintf(e.stdout, "check passed: %s\n", human.Escape(t.DoneWhen))
		}
	case task.Fail:
		t, err = a.TaskFail(c.Context, move)
	case task.Cancel:
		t, err = a.TaskCancel(c.Context, move)
	case task.Retry:
		t, err = a.TaskRetry(c.Context, move)
	}
	if err != nil {
		return err
	}
	return e.emit(t, fmt.Sprintf("%s %s", t.ID, t.Status))
}

func taskVerifyCommand() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "run the task's done-when check without completing it",
		UsageText: "crew task verify t1",
		ArgsUsage: "[TASK]",
		Flags: []cli.Flag{runFlag, taskFlag,
			&cli.StringFlag{Name: "done-timeout", Usage: "bound on the check, a `DURATION`", Value: "10m"},
		},
		Action: taskVerify,
	}
}

func taskVerify(c *cli.Context) error {
	e := newEnv(c)
	id, err := e.taskArg()
	if err != nil {
		return err
	}
	v, err := e.app().TaskVerify(c.Context, app.TaskVerify{Task: id, DoneTimeout: c.String("done-timeout")})
	if err != nil {
		return err
	}
	if v.Check == nil {
		return e.emit(v, "task "+v.Task+" has no done-when check")
	}
	return e.emit(v, "check passed: "+human.Escape(v.Check.Command))
}

// taskArg is the task named by the first argument, "" for the identity's
// (--task / CREW_TASK). A reason given where the task id goes (crew task
// fail "text") is crew.ErrInvalid saying where it goes.
func (e *env) taskArg() (string, error) {
	args := e.c.Args()
	if args.Len() > 1 {
		return "", fmt.Errorf("too many arguments: %q: %w", args.Slice(), crew.ErrInvalid)
	}
	id := args.First()
	if id == "" || !strings.ContainsAny(id, " \t") {
		return id, nil
	}
	if e.c.Command.HasName("fail") || e.c.Command.HasName("cancel") || e.c.Command.HasName("retry") {
		if err := crew.ValidateID("task", id); err != nil { // text where the task id goes
			return "", fmt.Errorf("invalid task id %q: %s; a reason goes in --reason: %w", id, crew.IDRule, crew.ErrInvalid)
		}
	}
	return id, nil
}

// taskRun opens the run (--run / CREW_RUN, else the latest) of the task
// named by the first argument, else by --task / CREW_TASK (crew task
// logs).
func (e *env) taskRun() (*run.Run, string, error) {
	id, err := e.taskArg()
	if err != nil {
		return nil, "", err
	}
	if id == "" {
		if id, err = e.task(); err != nil {
			return nil, "", err
		}
	} else if err := crew.ValidateID("task", id); err != nil {
		return nil, "", err
	}
	r, err := e.run()
	return r, id, err
}

// printWorkers lists the attempts of a task's supervised workers, as
// task show prints them.
func printWorkers(e *env, ws []state.Worker) {
	for _, w := range ws {
		ended := "running"
		if w.Stop != nil {
			ended = fmt.Sprintf("running, asked to stop at %s (%s by %s)", w.Stop.At, human.Escape(w.Stop.Reason), human.Escape(w.Stop.By))
		}
		if w.Exit != nil {
			ended = fmt.Sprintf("%s at %s", w.Exit.Describe(), w.ExitedAt)
		}
		where := human.Escape(w.Host)
		if w.Tmux != "" {
			where += ", tmux window " + human.Escape(w.Tmux)
		}
		fmt.Fprintf(e.stdout, "attempt %d  pid %d on %s, started %s: %s\n    %s\n", w.Attempt, w.PID, where, w.StartedAt, ended,
			human.Escape(strings.Join(w.Command, " ")))
	}
}
