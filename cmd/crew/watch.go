// crew watch: follow message arrivals, printing each or running a command
// per message.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
)

func watchCommand() *cli.Command {
	return &cli.Command{
		Name: "watch",
		Usage: "follow message arrivals in a run (all, or an agent's) and print each, or run CMD once per message " +
			"with the message as JSON on its stdin and CREW_MESSAGE_ID, CREW_RUN, CREW_TASK, CREW_KIND set",
		UsageText: "crew watch --agent t1 --exec 'tmux send-keys -t crew:t1 -l \"[crew] $CREW_KIND for $CREW_TASK: run crew inbox\"; tmux send-keys -t crew:t1 Enter'\n" +
			"crew watch --agent leader --exec ./answer.sh\n" +
			"crew watch --json\n" +
			"crew watch --agent t1 --count 1 --timeout 10m --json   # the next message for t1, or exit 5",
		Flags: []cli.Flag{runFlag,
			&cli.StringFlag{Name: "since", Usage: "start after seq `SEQ`, a decimal number (0: every message of the run)", DefaultText: "the run's last seq: only what arrives from now on"},
			&cli.StringFlag{Name: "agent", Usage: "only messages to `NAME`: a task id, a task's agent (all its tasks), or the leader (what workers send)"},
			&cli.StringFlag{Name: "exec", Usage: "shell `CMD` to run per message (sh -c); a failing CMD is reported and watching goes on"},
			&cli.IntFlag{Name: "count", Usage: "stop after `N` messages", DefaultText: "follow until interrupted"},
			&cli.StringFlag{Name: "timeout", Usage: "give up after `DURATION` (e.g. 30s, 10m) with exit 5, unless --count messages came first", DefaultText: "none"},
			nudgeAfterFlag, quietAfterFlag,
		},
		Action: watch,
	}
}

func watch(c *cli.Context) error {
	e := newEnv(c)
	r, err := e.run()
	if err != nil {
		return err
	}
	agent := c.String("agent")
	if agent != "" {
		if err := crew.ValidateID("agent", agent); err != nil {
			return err
		}
	}
	if c.Int("count") < 0 {
		return fmt.Errorf("--count must be 0 or more: %w", crew.ErrInvalid)
	}
	since, err := e.since()
	if err != nil {
		return err
	}
	ctx, cancel, err := withTimeout(c)
	if err != nil {
		return err
	}
	defer cancel()
	st, err := r.TaskState()
	if err != nil {
		return err
	}
	if !c.IsSet("since") {
		since = st.Seq // only what arrives from now on
	}
	e.pastEnd(r, since, st.Seq)
	f := newWatchFilter(r.Manifest.Leader, agent, st)
	if agent != "" && !f.leaderSide() && len(f.tasks) == 0 {
		fmt.Fprintf(e.stderr, "crew: watch: run %s has no task for agent %s yet; watching for one\n", r.ID(), agent)
	}
	cur, err := r.Events(since)
	if err != nil {
		return err
	}
	defer cur.Close()
	w := r.Watch()
	defer w.Close()
	o, err := e.waitOptions()
	if err != nil {
		return err
	}
	var alerts *livenessAlerts
	if f.leaderSide() {
		alerts = &livenessAlerts{last: map[string]string{}}
	}
	wait := func() error {
		if o.NudgeAfter > 0 || alerts != nil {
			return e.pollWait(ctx, r, w, o, alerts)
		}
		err := w.Wait(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			return e.watchTimedOut()
		}
		return err
	}
	_, err = e.eachEvent(cur, wait, e.deliver(ctx, f))
	return err
}

// pollWait is crew watch's wait with --nudge-after, or for the leader:
// it waits for the log to grow, a second at most, then nudges the tasks
// that are quiet for longer (run.NudgeQuiet), and tells the leader
// (alerts, when not nil) of tasks that turned quiet or dead.
func (e *env) pollWait(ctx context.Context, r *run.Run, w store.Waiter, o run.WaitOptions, alerts *livenessAlerts) error {
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	w.Wait(wctx)
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return e.watchTimedOut()
		}
		return err
	}
	st, live, err := r.TasksAlive(ctx, o.QuietAfter)
	if err != nil {
		return err
	}
	if alerts != nil {
		if err := e.alert(ctx, alerts, st, live); err != nil {
			return err
		}
	}
	_, err = r.NudgeQuiet(ctx, st, live, o.NudgeAfter)
	return err
}

// livenessAlerts remembers, for crew watch --agent leader, what each
// task was last seen doing, so that a task turning quiet or dead is told
// once per change.
type livenessAlerts struct {
	last map[string]string // task id -> liveness state
}

// alert prints (or hands --exec) a record for each task of st that has
// turned quiet or dead since the last call: {"kind":"quiet"|"dead",
// "task","liveness"}; with --exec, CREW_KIND is the state and CREW_TASK
// the task (runExec).
func (e *env) alert(ctx context.Context, a *livenessAlerts, st *state.State, live map[string]*run.Liveness) error {
	for _, t := range st.TaskList() {
		now := ""
		if l := live[t.ID]; l != nil {
			now = l.State
		}
		before := a.last[t.ID]
		a.last[t.ID] = now
		if now == before || (now != run.LiveQuiet && now != run.LiveDead) {
			continue
		}
		l := live[t.ID]
		rec := map[string]any{"kind": now, "task": t, "liveness": l}
		if cmd := e.c.String("exec"); cmd != "" {
			e.runExec(ctx, cmd, rec, "task "+t.ID+" turning "+now, "CREW_RUN="+st.Run, "CREW_TASK="+t.ID, "CREW_KIND="+now)
		} else if err := e.emit(rec, fmt.Sprintf("%s is %s", t.ID, livenessText(l))); err != nil {
			return err
		}
	}
	return nil
}

// watchTimedOut is crew watch's error at its --timeout.
func (e *env) watchTimedOut() error {
	return fmt.Errorf("watch: no more messages within --timeout %s: %w", e.c.String("timeout"), crew.ErrTimeout)
}

// deliver returns crew watch's callback for eachEvent: it prints each
// message that f matches, or runs --exec for it, and ends the watch after
// --count of them.
func (e *env) deliver(ctx context.Context, f *watchFilter) func(*events.Event) error {
	seen, count := 0, e.c.Int("count")
	return func(ev *events.Event) error {
		f.learn(ev)
		taskID, ok := f.match(ev)
		if !ok {
			return nil
		}
		m := *ev.Message
		if m.To == events.Broadcast && f.agent != "" {
			m.To = taskID // this agent's copy, as crew inbox shows it
		}
		seen++
		if cmd := e.c.String("exec"); cmd != "" {
			e.execFor(ctx, cmd, &m, taskID)
		} else if err := e.emit(&m, messageText(&m)); err != nil {
			return err
		}
		if seen == count {
			return errStop
		}
		return nil
	}
}

// watchFilter selects the messages crew watch --agent follows.
type watchFilter struct {
	leader string          // the run's leader agent
	agent  string          // "" follows every message
	tasks  map[string]bool // the tasks agent stands for: its own id, or the tasks whose agent it is
}

func newWatchFilter(leader, agent string, st *state.State) *watchFilter {
	f := &watchFilter{leader: leader, agent: agent, tasks: map[string]bool{}}
	for _, t := range st.Tasks {
		if t.ID == agent || t.Agent == agent {
			f.tasks[t.ID] = true
		}
	}
	return f
}

// leaderSide reports whether the agent followed is the leader.
func (f *watchFilter) leaderSide() bool {
	return f.agent == f.leader || f.agent == run.Leader
}

// learn notes tasks added to the run while watching.
func (f *watchFilter) learn(e *events.Event) {
	if e.Type != events.TaskCreated || f.agent == "" {
		return
	}
	var spec state.TaskSpec
	json.Unmarshal(e.Data, &spec)
	if e.Task == f.agent || spec.Agent == f.agent {
		f.tasks[e.Task] = true
	}
}

// match reports whether event e carries a message for the followed agent,
// and the task it concerns (for a broadcast followed for an agent, the
// agent's receiving task; otherwise the message's task).
func (f *watchFilter) match(e *events.Event) (string, bool) {
	m := e.Message
	switch {
	case m == nil:
		return "", false
	case f.agent == "":
		return m.Task, true
	case m.Direction == events.Outbox:
		return m.Task, f.leaderSide()
	}
	for _, t := range state.Recipients(e) {
		if f.tasks[t] {
			return t, true
		}
	}
	return "", false
}

// execFor runs cmd with sh -c for one message: the message as one JSON
// line on its stdin, its ids and the state root (CREW_DIR, or CREW_STORE
// and the NATS settings) in the environment. A failure is reported on
// stderr and watching goes on.
func (e *env) execFor(ctx context.Context, cmd string, m *events.Message, taskID string) {
	e.runExec(ctx, cmd, m, "message "+m.ID, "CREW_MESSAGE_ID="+m.ID, "CREW_RUN="+m.Run, "CREW_TASK="+taskID, "CREW_KIND="+m.Kind)
}

// runExec runs --exec CMD with sh -c: rec as one JSON line on its
// stdin, env and the state root (CREW_DIR, or CREW_STORE and the NATS
// settings) in its environment. A failure is reported on stderr, naming
// what it ran for, and watching goes on.
func (e *env) runExec(ctx context.Context, cmd string, rec any, what string, env ...string) {
	line, _ := jsonLine(rec)
	// Ctrl-C, SIGTERM or --timeout end a CMD that hangs too (sh gets
	// SIGKILL; WaitDelay bounds waiting for its output).
	x := exec.CommandContext(ctx, "sh", "-c", cmd)
	x.WaitDelay = time.Second
	x.Stdin = bytes.NewReader(line)
	x.Stdout, x.Stderr = e.stdout, e.stderr
	x.Env = append(os.Environ(), env...)
	if root, err := e.root(); err == nil {
		x.Env = append(x.Env, e.storeEnv(root)...) // crew in CMD finds the same state root
	}
	if err := x.Run(); err != nil {
		fmt.Fprintf(e.stderr, "crew: watch: %s for %s: %v\n", human.Escape(cmd), what, err)
	}
}
