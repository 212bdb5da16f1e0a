package main

// hook_http_ms and mcp_http_steer_ratio: crew serve answering an agent's
// HTTP hooks and MCP over Streamable HTTP, from one resident process
// (agenthook, web's /hooks/ and /mcp), beside hook_idle_ms's
// process per hook.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/web"
)

// httpResult holds the figures of benchHTTP.
type httpResult struct {
	idleP50, idleP99, steerP50, steerP99 float64
}

// benchHTTP measures hook_http_ms (nothing to deliver, and one steer to
// deliver) and mcp_http_steer_ratio against one crew serve, and adds
// their rows.
func benchHTTP(tmp string, c config, res *result, rows []row) ([]row, error) {
	dir := filepath.Join(tmp, "http")
	r, err := newRun(dir, "http", "h1", "m1")
	if err != nil {
		return rows, err
	}
	r.SetAsync(false) // as a crew steer process: its projections are written when it returns
	token := web.NewToken()
	cmd, _ := command(c.crew, append(crewEnv(filepath.Join(dir, ".crew"), "http"), "CREW_TOKEN="+token), "serve", "--addr", "127.0.0.1:0", "--json")
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		return rows, err
	}
	if err := cmd.Start(); err != nil {
		return rows, err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var urls struct{ MCP, Hooks string }
	sc := bufio.NewScanner(out)
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &urls) != nil {
		return rows, fmt.Errorf("crew serve --json printed %q", sc.Text())
	}
	go io.Copy(io.Discard, out)

	step("%d PostToolUse HTTP hooks to crew serve with nothing to deliver, then %d with one steer each", c.wake, c.wake)
	h, err := hookHTTP(r, urls.Hooks, token, c.wake)
	if err != nil {
		return rows, err
	}
	res.HookHTTPIdleP50ms, res.HookHTTPIdleP99ms, res.HookHTTPSteerP50ms, res.HookHTTPSteerP99ms = h.idleP50, h.idleP99, h.steerP50, h.steerP99

	step("steers through one MCP session over crew serve's Streamable HTTP against the library, %d rounds of %s each", c.rounds, c.round)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "crewbench", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: urls.MCP + "&run=http"}, nil)
	if err != nil {
		return rows, fmt.Errorf("MCP over HTTP: %w", err)
	}
	defer cs.Close()
	lib := rate(func(i int) error {
		_, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "m1", From: run.Leader, Body: body("steer", i, 120)})
		return err
	})
	viaHTTP := rate(func(i int) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "crew_steer", Arguments: map[string]any{"task": "m1", "body": body("mcp steer", i, 120)}})
		if err == nil && res.IsError {
			err = fmt.Errorf("crew_steer: %v", res.Content)
		}
		return err
	})
	libS, httpS, err := alternateWith(c, "library", lib, "mcp-http", viaHTTP)
	if err != nil {
		return rows, err
	}
	res.MCPHTTPSteerPerS, res.MCPHTTPSteerRatio = median(httpS), medianRatio(httpS, libS)

	step("calls of a tool that does nothing over the MCP SDK's Streamable HTTP, in this process, against the library, %d rounds of %s each", c.rounds, c.round)
	noop, stopNoop, err := httpNoop(ctx)
	if err != nil {
		return rows, err
	}
	libN, noopS, err := alternateWith(c, "library", lib, "mcp-http-noop", noop)
	stopNoop()
	if err != nil {
		return rows, err
	}
	res.MCPHTTPNoopPerS = median(noopS)
	// A steer costs 1/lib; one over HTTP that added only the SDK's floor
	// would cost 1/lib + 1/noop, a ratio of 1 / (1 + lib/noop). The
	// library's rate swings with the disk from round to round: the
	// median of all its rounds.
	res.MCPHTTPSteerLimit = 1 / (1 + median(append(libS, libN...))/res.MCPHTTPNoopPerS)
	res.MCPHTTPOfLimit = res.MCPHTTPSteerRatio / res.MCPHTTPSteerLimit
	return append(rows,
		row{"hook_http_ms", "a PostToolUse HTTP hook answered by crew serve (keep-alive), nothing to deliver: p50 / p99", f2(h.idleP50) + " / " + f2(h.idleP99), "≤ 1 / ≤ 5", fmt.Sprintf("%d samples; beside hook_idle_ms, a process per hook", c.wake)},
		row{"hook_http_steer_ms", "the same with one steer to deliver (the answer is complete before the delivery is recorded): p50 / p99", f2(h.steerP50) + " / " + f2(h.steerP99), "≤ 1 / ≤ 5", fmt.Sprintf("%d samples", c.wake)},
		row{"mcp_http_steer_ratio", "steers through one MCP session over crew serve's Streamable HTTP ÷ library steers (each waiting for its projections), same run", f2(res.MCPHTTPSteerRatio), "≥ 0.5", f0(res.MCPHTTPSteerPerS) + " steers/s over HTTP"},
		row{"mcp_http_steer_limit", "the mcp_http_steer_ratio a steer would reach if crew serve added only the SDK's floor over HTTP (calls of a tool doing nothing, client and server in one process) to a library steer", f2(res.MCPHTTPSteerLimit), "(reference)", f0(res.MCPHTTPNoopPerS) + " empty tool calls/s over HTTP"},
		row{"mcp_http_of_limit", "mcp_http_steer_ratio ÷ mcp_http_steer_limit", f2(res.MCPHTTPOfLimit), "(context)", ""},
	), nil
}

// httpNoop serves noopServer over the MCP SDK's Streamable HTTP handler
// on a loopback port of this process and returns a driver calling its
// crew_steer through the SDK's client, one call after another, and a
// function that ends both.
func httpNoop(ctx context.Context) (calls func(time.Duration) (float64, error), stop func(), err error) {
	s := noopServer()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "crewbench", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	calls = rate(func(i int) error {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "crew_steer", Arguments: map[string]any{"task": "m1", "body": body("mcp steer", i, 120)}})
		return err
	})
	return calls, func() { cs.Close(); srv.Close() }, nil
}

// hookHTTP posts n PostToolUse hooks for task h1 with nothing to
// deliver, then n each after a steer sent through the library (the
// answer must carry it; it is acknowledged after, so every sample's open
// list is the same), over one keep-alive connection, after 10 of each
// not counted, and returns the percentiles of their round trips.
func hookHTTP(r *run.Run, hooks, token string, n int) (httpResult, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	post := func() (string, time.Duration, error) {
		req, err := http.NewRequest(http.MethodPost, hooks+"claude/PostToolUse", strings.NewReader(`{"hook_event_name":"PostToolUse","session_id":"bench","tool_name":"Bash"}`))
		if err != nil {
			return "", 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Crew-Run", "http")
		req.Header.Set("X-Crew-Task", "h1")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return "", 0, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("HTTP hook: %s: %s", resp.Status, b)
		}
		return string(b), took, err
	}
	var res httpResult
	var idle, steered []float64
	ctx := context.Background()
	for i := range n + 10 {
		out, d, err := post()
		if err != nil {
			return res, err
		}
		if out != "" {
			return res, fmt.Errorf("HTTP hook with nothing to deliver answered %q", out)
		}
		if i >= 10 {
			idle = append(idle, float64(d.Microseconds())/1000)
		}
	}
	for i := range n + 10 {
		m, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "h1", From: run.Leader, Body: body("steer", i, 120)})
		if err != nil {
			return res, err
		}
		out, d, err := post()
		if err != nil {
			return res, err
		}
		if !bytes.Contains([]byte(out), []byte(m.ID)) {
			return res, fmt.Errorf("HTTP hook after steer %s answered %q", m.ID, out)
		}
		if err := r.Acknowledge(ctx, "h1", []string{m.ID}, false, ""); err != nil {
			return res, err
		}
		if i >= 10 {
			steered = append(steered, float64(d.Microseconds())/1000)
		}
	}
	res.idleP50, res.idleP99 = percentile(idle, 50), percentile(idle, 99)
	res.steerP50, res.steerP99 = percentile(steered, 50), percentile(steered, 99)
	return res, nil
}
