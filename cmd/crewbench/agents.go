package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mcpserver"
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

// hookSeen measures how soon a steer reaches a Claude Code worker: a
// simulated agent loop runs `crew hook claude PostToolUse` (a process, as
// Claude Code runs it) with period between the end of one call and the
// start of the next, as between tool calls; the leader sends n steers
// one at a time, each at a random moment of the loop, through the
// library. A sample is the time from the send's return (the steer
// durable) to the end of the hook call whose answer carries the steer's
// id. It returns the 50th and 99th percentiles in milliseconds; the goal
// is within one period.
func hookSeen(tmp string, c config, n int, period time.Duration) (p50, p99 float64, err error) {
	dir := filepath.Join(tmp, "seen")
	r, err := newRun(dir, "seen", "s1")
	if err != nil {
		return 0, 0, err
	}
	r.SetAsync(false) // as a crew steer process: its projections are written when it returns
	env := append(crewEnv(filepath.Join(dir, ".crew"), "seen"), "CREW_TASK=s1")
	var (
		mu   sync.Mutex
		want string    // the id of the steer in flight
		sent time.Time // when its send returned
		seen = make(chan float64)
		stop = make(chan struct{})
		fail = make(chan error, 1)
	)
	go func() { // the agent's loop
		for {
			select {
			case <-stop:
				return
			case <-time.After(period):
			}
			cmd, stderr := command(c.crew, env, "hook", "claude", "PostToolUse")
			out, err := cmd.Output()
			end := time.Now()
			if err != nil {
				fail <- fmt.Errorf("crew hook claude PostToolUse: %v: %s", err, stderr)
				return
			}
			mu.Lock()
			id, at := want, sent
			if id != "" && bytes.Contains(out, []byte(id)) {
				want = ""
				mu.Unlock()
				seen <- float64(end.Sub(at).Microseconds()) / 1000
				continue
			}
			mu.Unlock()
		}
	}()
	defer close(stop)
	ctx := context.Background()
	var ms []float64
	for i := range n {
		time.Sleep(time.Duration(rand.Int64N(int64(period))))
		m, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "s1", From: run.Leader, Body: body("steer", i, 120)})
		if err != nil {
			return 0, 0, err
		}
		mu.Lock()
		want, sent = m.ID, time.Now()
		mu.Unlock()
		select {
		case v := <-seen:
			ms = append(ms, v)
		case err := <-fail:
			return 0, 0, err
		}
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

// mcpInProcess returns the drivers of mcp_inproc_ratio: steers through
// the library (as mcpSteer's), and steers through an MCP server in this
// process (package mcpserver over the app layer, as crew mcp serves
// them), its client the Go SDK's over in-memory transports, one
// crew_steer call after another, in the same run; and a function that
// ends the session. What it measures is what a tool call adds to the
// operation: the JSON-RPC on both sides, the request's schema check and
// the app layer, without a process or a pipe.
func mcpInProcess(tmp string) (lib, viaMCP func(time.Duration) (float64, error), stop func(), err error) {
	dir := filepath.Join(tmp, "mcp-inproc")
	r, err := newRun(dir, "inproc", "m1")
	if err != nil {
		return nil, nil, nil, err
	}
	r.SetAsync(false)
	ctx := context.Background()
	lib = rate(func(i int) error {
		_, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "m1", From: run.Leader, Body: body("steer", i, 120)})
		return err
	})
	// The server's own root, found as crew mcp finds it: a store that
	// keeps each run's Log between tool calls.
	root, err := run.FindKept(dir, crew.PrivatePerm)
	if err != nil {
		return nil, nil, nil, err
	}
	a := app.New(func() (*run.Root, error) { return root, nil }, app.Identity{Run: "inproc"})
	viaMCP, end, err := toolCalls(mcpserver.New(mcpserver.Options{App: a, Version: "bench"}).Server, "crew_steer")
	if err != nil {
		root.Close()
		return nil, nil, nil, err
	}
	return lib, viaMCP, func() { end(); root.Close() }, nil
}

// mcpNoop returns the driver of mcp_noop_per_s: calls of a tool that does
// nothing, with crew_steer's input and a message-sized output, through
// the same SDK and in-memory transports as mcpInProcess: the floor a
// tool call costs before crew does anything.
func mcpNoop() (calls func(time.Duration) (float64, error), stop func(), err error) {
	return toolCalls(noopServer(), "crew_steer")
}

// noopServer is an MCP server whose crew_steer does nothing: it takes
// crew_steer's input and answers a message-sized output.
func noopServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "noop", Version: "bench"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "crew_steer", OutputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, _ *mcp.CallToolRequest, in app.ToWorker) (*mcp.CallToolResult, any, error) {
			return nil, &events.Message{ID: "0193a1c2-7b1e-7c3d-9e2f-0a1b2c3d4e5f", Seq: 1, Kind: events.KindSteer, From: run.Leader, To: in.Task, Body: in.Body, Priority: events.DefaultPriority}, nil
		})
	return s
}

// toolCalls connects the Go SDK's client to s over in-memory transports
// and returns a driver calling tool (with a task and a body of 120 bytes)
// one call after another, and a function that ends the session.
func toolCalls(s *mcp.Server, tool string) (calls func(time.Duration) (float64, error), stop func(), err error) {
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		return nil, nil, err
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "crewbench", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		ss.Close()
		return nil, nil, err
	}
	calls = rate(func(i int) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"task": "m1", "body": body("mcp steer", i, 120)}})
		if err == nil && res.IsError {
			err = fmt.Errorf("%s: %v", tool, res.Content)
		}
		return err
	})
	return calls, func() { cs.Close(); ss.Close() }, nil
}
