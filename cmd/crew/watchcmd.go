package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
)

func watchCommand() *cli.Command {
	return &cli.Command{
		Name:  "watch",
		Usage: "follow message arrivals in a run and run CMD once per message, the message JSON on its stdin",
		UsageText: "crew watch --agent t1 --exec 'tmux send-keys -t worker1 \"crew inbox\" Enter'\n" +
			"   crew watch --json",
		Flags: []cli.Flag{runFlag, sinceFlag,
			&cli.StringFlag{Name: "agent", Usage: "only messages to agent (or task) `NAME`; leader for what workers send"},
			&cli.StringFlag{Name: "exec", Usage: "shell `CMD` to run per message (env CREW_MESSAGE_ID, CREW_RUN, CREW_TASK, CREW_KIND)"},
		},
		Action: func(c *cli.Context) error {
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
			since := c.Int64("since")
			if !c.IsSet("since") {
				// Only what arrives from now on.
				st, err := r.State()
				if err != nil {
					return err
				}
				since = st.Seq
			}
			cur, err := events.Read(r.EventsPath(), since)
			if err != nil {
				return err
			}
			defer cur.Close()
			w := r.Watch()
			defer w.Close()
			for {
				ev, err := cur.Next()
				if err == io.EOF {
					if err := w.Wait(c.Context); err != nil {
						return err
					}
					continue
				}
				var de *events.DamageError
				if errors.As(err, &de) {
					fmt.Fprintf(e.stderr, "crew: %s\n", escape(de.Error()))
				} else if err != nil {
					return err
				}
				m := ev.Message
				if m == nil || !e.addressedTo(r.Manifest.Leader, agent, m) {
					continue
				}
				if cmd := c.String("exec"); cmd != "" {
					e.execFor(cmd, m)
					continue
				}
				if err := e.emit(m, messageText(m)); err != nil {
					return err
				}
			}
		},
	}
}

// addressedTo reports whether m is for agent ("" matches all): the leader
// by its name or "leader", a task by its id or its agent's name.
func (e *env) addressedTo(leader, agent string, m *events.Message) bool {
	switch {
	case agent == "":
		return true
	case m.Direction == events.Outbox:
		return agent == leader || agent == "leader"
	case m.To == events.Broadcast:
		return agent != leader && agent != "leader"
	default:
		return m.To == agent || m.Task == agent
	}
}

// execFor runs cmd with sh -c for one message; a failure is reported and
// watching goes on.
func (e *env) execFor(cmd string, m *events.Message) {
	line, _ := jsonLine(m)
	x := exec.Command("sh", "-c", cmd)
	x.Stdin = bytes.NewReader(line)
	x.Stdout, x.Stderr = e.stdout, e.stderr
	x.Env = append(os.Environ(), "CREW_MESSAGE_ID="+m.ID, "CREW_RUN="+m.Run, "CREW_TASK="+m.Task, "CREW_KIND="+m.Kind)
	if err := x.Run(); err != nil {
		fmt.Fprintf(e.stderr, "crew: watch: %s for message %s: %v\n", escape(cmd), m.ID, err)
	}
}
