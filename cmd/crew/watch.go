// crew watch: follow message arrivals, printing each or running a command
// per message.

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
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
	req := app.Watch{Agent: c.String("agent"), Count: c.Int("count"), Timeout: c.String("timeout"),
		NudgeAfter: c.String("nudge-after"), QuietAfter: c.String("quiet-after")}
	if c.IsSet("since") {
		since, err := e.since()
		if err != nil {
			return err
		}
		req.Since = &since
	}
	cmd := c.String("exec")
	return e.app().Watch(c.Context, req, e.warn, func(ctx context.Context, w app.Watched) error {
		switch {
		case w.Alert != nil && cmd != "":
			e.runExec(ctx, cmd, w.Alert, "task "+w.Task+" turning "+w.Alert.Kind, "CREW_RUN="+w.Run, "CREW_TASK="+w.Task, "CREW_KIND="+w.Alert.Kind)
		case w.Alert != nil:
			return e.emit(w.Alert, fmt.Sprintf("%s is %s", w.Task, livenessText(w.Alert.Liveness)))
		case cmd != "":
			e.execFor(ctx, cmd, w.Message, w.Task)
		default:
			return e.emit(w.Message, messageText(w.Message))
		}
		return nil
	})
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
