// crew hook claude|gemini|codex EVENT: crew's deliveries inside an agent's
// loop. The agent runs the command at points of its loop with a JSON
// object on standard input and reads a JSON answer on standard output.
// This file only reads the command line and standard input: the
// translation between the agent's JSON and crew's deliveries is package
// agenthook's, shared with crew serve's HTTP hooks.

package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/agenthook"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/agentconfig"
	"github.com/crew-dev/crew/internal/human"
)

// hookAgent is an agent whose hooks crew answers (agenthook.Agent).
type hookAgent = agenthook.Agent

// hookAgents are the agents crew hook answers.
var hookAgents = agenthook.Agents

// hookInput is the part of a hook's input crew reads.
type hookInput = agenthook.Input

// hookOutput is a hook's answer.
type hookOutput = agenthook.Output

// codexAgent is hookAgents' Codex.
var codexAgent = hookAgents[2]

// waitTimeout is the timeout, in seconds, setup gives the wait hook:
// a day, after which the agent kills it and its next stop or prompt
// arms another.
const waitTimeout = 86400

// setupHooks are the crew hook commands crew setup writes for a, running
// command (agentconfig.Hooks).
func setupHooks(a hookAgent, command string) agentconfig.Hooks {
	h := agentconfig.Hooks{Command: command, Agent: a.Name, WaitEvents: a.WaitEvents, FailOpen: a.FailOpen}
	if len(a.WaitEvents) > 0 {
		h.WaitTimeout = waitTimeout
	}
	for _, ev := range a.Events {
		h.Events = append(h.Events, ev.Name)
		if ev.At == app.AtToolResult {
			h.ToolEvents = append(h.ToolEvents, ev.Name)
		}
	}
	return h
}

func hookCommand() *cli.Command {
	cmd := &cli.Command{
		Name:  "hook",
		Usage: "deliver crew's messages inside an agent's loop (its hooks): crew hook claude|gemini|codex EVENT",
		UsageText: "crew setup claude   # writes the hooks into .claude/settings.json\n" +
			"echo '{\"hook_event_name\":\"PostToolUse\"}' | CREW_RUN=r1 CREW_TASK=t1 crew hook claude PostToolUse",
	}
	for _, a := range hookAgents {
		usage := a.Title + " hooks (" + a.EventNames(", ", " and ") + "): the hook's JSON input on standard input, its JSON answer on standard output"
		usageText := "CREW_RUN=r1 CREW_TASK=t1 crew hook " + a.Name + " " + a.Events[1].Name + " < hook-input.json"
		if len(a.WaitEvents) > 0 {
			usage += "; crew hook " + a.Name + " wait, an asyncRewake hook, waits for the agent's mail and exits 2 with it on standard error, which wakes an idle session"
			usageText += "\nCREW_RUN=r1 CREW_TASK=t1 crew hook " + a.Name + " wait < hook-input.json   # exit 2: woken, the delivery on stderr"
		}
		cmd.Subcommands = append(cmd.Subcommands, &cli.Command{
			Name:      a.Name,
			Usage:     usage,
			UsageText: usageText,
			ArgsUsage: "EVENT",
			Flags: []cli.Flag{runFlag, taskFlag, asFlag,
				&cli.BoolFlag{Name: "peek", Usage: "at SessionStart: print what the hook would deliver, record nothing (crew setup's check)"}},
			Action: func(c *cli.Context) error { return agentHook(c, a) },
		})
	}
	return cmd
}

// agentHook answers one hook of agent a. An agent that is no crew
// worker (no --task / CREW_TASK) gets no answer. Any failure is exit 1,
// which the agent shows and goes on from (exit 2 would block its tool
// call or stop).
func agentHook(c *cli.Context, a hookAgent) error {
	err := answerHook(c, a)
	switch {
	case err == errWoken:
		return wokenExit
	case err != nil:
		return cli.Exit("hook: "+human.Escape(message(err)), exitIO)
	}
	return nil
}

// wokenExit is the error of a wait hook that delivered: exit wakeExit,
// nothing more on standard error.
var wokenExit = cli.Exit("", wakeExit)

// hookFailure is the error of a crew hook command line that failed:
// exit 1 whatever the failure, a usage error too (a flag this crew does
// not know in a hand-edited settings file, an agent it does not know),
// since exit 2 blocks Claude Code's stop, wakes a session from an
// asyncRewake hook and replaces a tool's output on Codex (docs/cli.md).
// Only the wait hook's wake (wokenExit) is exit 2.
func hookFailure(err error) error {
	var ec cli.ExitCoder
	if errors.Is(err, wokenExit) || errors.As(err, &ec) && ec.ExitCode() == exitIO {
		return err
	}
	return cli.Exit("hook: "+human.Escape(message(err)), exitIO)
}

func answerHook(c *cli.Context, a hookAgent) error {
	e := newEnv(c)
	if c.Args().Len() != 1 {
		return fmt.Errorf("hook %s takes one event: %s: %w", a.Name, a.EventNames(", ", " or "), crew.ErrInvalid)
	}
	event := c.Args().First()
	if event == "wait" && len(a.WaitEvents) > 0 {
		in, err := readHookInput(c)
		if err != nil {
			return err
		}
		return wait(c, e, a, in)
	}
	in, err := readHookInput(c)
	if err != nil {
		return err
	}
	req, err := a.Request(event, in, events.ViaHook)
	if err != nil {
		return err
	}
	req.Peek = c.Bool("peek")
	if a.Name == codexAgent.Name {
		if req.Tools.Crew, err = selfPath(); err != nil {
			req.Tools.Crew = ""
		}
	}
	d, err := e.app().Deliver(c.Context, req)
	if err != nil {
		return err
	}
	out := agenthook.Answer(event, in, d)
	if out == nil {
		return nil
	}
	line, err := jsonLine(out)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(line)
	return err
}

// readHookInput reads the hook's JSON input from standard input (none:
// the zero input).
func readHookInput(c *cli.Context) (hookInput, error) { return agenthook.ReadInput(c.App.Reader) }
