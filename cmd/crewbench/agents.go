package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
)

// hookIdle runs `crew hook claude PostToolUse` for a worker with nothing
// new, n times one after another, and returns the 50th and 99th
// percentiles of its wall time in milliseconds: what every tool call of
// a Claude Code worker pays for crew's hook.
func hookIdle(tmp string, c config, n int) (p50, p99 float64, err error) {
	dir := filepath.Join(tmp, "hook")
	r, err := newRun(dir, "hook", "h1")
	if err != nil {
		return 0, 0, err
	}
	r.Sync()
	env := append(crewEnv(filepath.Join(dir, ".crew"), "hook"), "CREW_TASK=h1")
	for range 10 { // warm-up
		if _, err := timeProcess(c.crew, env, "hook", "claude", "PostToolUse"); err != nil {
			return 0, 0, err
		}
	}
	var ms []float64
	for range n {
		v, err := timeProcess(c.crew, env, "hook", "claude", "PostToolUse")
		if err != nil {
			return 0, 0, err
		}
		ms = append(ms, v)
	}
	return percentile(ms, 50), percentile(ms, 99), nil
}

// mcpSteer returns the drivers of mcp_steer_ratio: steers through the
// library (a Run waiting for each call's projections, as a command
// does), and steers through one `crew mcp` session (the Go SDK's client
// over stdio, one crew_steer call after another), in the same run; and a
// function that ends the session.
func mcpSteer(tmp string, c config) (lib, viaMCP func(time.Duration) (float64, error), stop func(), err error) {
	dir := filepath.Join(tmp, "mcp")
	r, err := newRun(dir, "mcp", "m1")
	if err != nil {
		return nil, nil, nil, err
	}
	r.SetAsync(false)
	ctx := context.Background()
	lib = rate(func(i int) error {
		_, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "m1", From: run.Leader, Body: body("steer", i, 120)})
		return err
	})
	cmd := exec.Command(c.crew, "mcp")
	cmd.Env = crewEnv(filepath.Join(dir, ".crew"), "mcp")
	client := mcp.NewClient(&mcp.Implementation{Name: "crewbench", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("crew mcp: %w", err)
	}
	viaMCP = rate(func(i int) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "crew_steer", Arguments: map[string]any{"task": "m1", "body": body("mcp steer", i, 120)}})
		if err == nil && res.IsError {
			err = fmt.Errorf("crew_steer: %v", res.Content)
		}
		return err
	})
	return lib, viaMCP, func() { cs.Close() }, nil
}
