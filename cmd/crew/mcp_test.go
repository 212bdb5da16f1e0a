//go:build unix

package main

// crew mcp with a real client: the Go SDK's client over
// mcp.CommandTransport starts the built crew binary (`crew mcp`) as a
// worker or as the leader, and the other side is the crew command line,
// a process of its own. Waits are blocking reads of crew streams (crew
// outbox --follow) or blocking calls; the only clock is e2eBound, which
// turns a hang into a failure.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/state"
)

// mcpFixture is a state root with run r1 and the built binary.
type mcpFixture struct {
	*e2eLeader
}

func newMCPFixture(t *testing.T, ctx context.Context, bin string) *mcpFixture {
	dir := t.TempDir()
	l := &e2eLeader{t: t, ctx: ctx, bin: bin, dir: dir,
		env: e2eEnv(filepath.Dir(bin), "CREW_DIR="+filepath.Join(dir, ".crew"), "CREW_RUN=r1")}
	l.must("init")
	l.must("run", "create", "--id", "r1", "--title", "mcp")
	return &mcpFixture{l}
}

// session starts `crew mcp` with extra environment (CREW_TASK for a
// worker) and connects the SDK's client to it.
func (f *mcpFixture) session(onProgress func(*mcp.ProgressNotificationParams), extra ...string) *mcp.ClientSession {
	f.t.Helper()
	opts := &mcp.ClientOptions{}
	if onProgress != nil {
		opts.ProgressNotificationHandler = func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { onProgress(req.Params) }
	}
	return f.sessionWith(opts, extra...)
}

// sessionWith is session with the client's options.
func (f *mcpFixture) sessionWith(opts *mcp.ClientOptions, extra ...string) *mcp.ClientSession {
	f.t.Helper()
	cmd := exec.Command(f.bin, "mcp", "--progress-every", "50ms")
	cmd.Dir, cmd.Env = f.dir, append(slices.Clone(f.env), extra...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "crew-test", Version: "1"}, opts)
	cs, err := client.Connect(f.ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		f.t.Fatalf("connect to crew mcp: %v (stderr: %s)", err, stderr.String())
	}
	f.t.Cleanup(func() {
		cs.Close()
		if stderr.Len() > 0 {
			f.t.Logf("crew mcp stderr: %s", stderr.String())
		}
	})
	return cs
}

// call calls a tool and fails the test on a protocol error or an error
// result; it returns the structured output.
func mcpCall(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	res := mcpTry(t, ctx, cs, name, args)
	if res.IsError {
		t.Fatalf("%s %v: error result: %s", name, args, mcpText(res))
	}
	out, _ := res.StructuredContent.(map[string]any)
	return out
}

// mcpTry calls a tool and returns its result, error or not.
func mcpTry(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return res
}

func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// follow starts `crew outbox --follow --json` and returns a function that
// blocks until its next line, decoded.
func (f *mcpFixture) follow() func() events.Message {
	ctx, cancel := context.WithCancel(f.ctx)
	cmd := exec.CommandContext(ctx, f.bin, "outbox", "--follow", "--json")
	cmd.Dir, cmd.Env = f.dir, f.env
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { cancel(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 4<<20)
	return func() events.Message {
		f.t.Helper()
		if !sc.Scan() {
			f.t.Fatalf("crew outbox --follow ended: %v", sc.Err())
		}
		var m events.Message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			f.t.Fatal(err)
		}
		return m
	}
}

// buildCrew builds the crew binary into a temporary directory.
func buildCrew(t *testing.T) string {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("needs go: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "crew")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestMCP(t *testing.T) {
	t.Parallel()
	bin := buildCrew(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eBound)
	t.Cleanup(cancel) // after the parallel subtests
	t.Run("worker-asks-over-mcp-leader-responds-by-cli", func(t *testing.T) {
		t.Parallel()
		testMCPWorkerAsks(t, newMCPFixture(t, ctx, bin))
	})
	t.Run("leader-over-mcp-worker-by-cli", func(t *testing.T) {
		t.Parallel()
		testMCPLeader(t, newMCPFixture(t, ctx, bin))
	})
	t.Run("cancelled-ask-leaves-the-question-open", func(t *testing.T) {
		t.Parallel()
		testMCPCancelledAsk(t, newMCPFixture(t, ctx, bin))
	})
	t.Run("resources-and-subscriptions", func(t *testing.T) {
		t.Parallel()
		testMCPResources(t, newMCPFixture(t, ctx, bin))
	})
	t.Run("every-tool-listed-and-callable", func(t *testing.T) {
		t.Parallel()
		testMCPEveryTool(t, newMCPFixture(t, ctx, bin))
	})
}

func testMCPWorkerAsks(t *testing.T, f *mcpFixture) {
	f.must("task", "add", "t1", "--title", "fix Reverse")
	var progress atomic.Int64
	cs := f.session(func(p *mcp.ProgressNotificationParams) {
		if p.ProgressToken == "ask-1" {
			progress.Add(1)
		}
	}, "CREW_TASK=t1")
	if task := mcpCall(t, f.ctx, cs, "crew_task_start", nil); task["status"] != "running" {
		t.Fatalf("crew_task_start: %v", task)
	}
	next := f.follow()
	answer := make(chan *mcp.CallToolResult, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "crew_ask", Arguments: map[string]any{"question": "Fix Reverse, or skip the test?", "wait": true}}
		params.SetProgressToken("ask-1")
		res, err := cs.CallTool(f.ctx, params)
		if err != nil {
			t.Errorf("crew_ask: %v", err)
		}
		answer <- res
	}()
	q := next()
	if q.Kind != events.KindQuestion || q.Task != "t1" || q.Body != "Fix Reverse, or skip the test?" {
		t.Fatalf("the leader read %+v, want t1's question", q)
	}
	// The worker's call is blocked: progress notifications arrive (every
	// 50 ms here) until the leader answers.
	for progress.Load() < 2 {
		select {
		case res := <-answer:
			t.Fatalf("crew_ask returned before the response: %s", mcpText(res))
		case <-time.After(10 * time.Millisecond):
		}
	}
	f.must("respond", "t1", "Fix Reverse: runes, not bytes.")
	res := <-answer
	if res == nil || res.IsError {
		t.Fatalf("crew_ask: %v", res)
	}
	m, _ := res.StructuredContent.(map[string]any)
	if m["kind"] != events.KindResponse || m["body"] != "Fix Reverse: runes, not bytes." || m["replyTo"] != q.ID || m["status"] != events.StatusAcknowledged {
		t.Fatalf("crew_ask returned %v, want the response to %s", m, q.ID)
	}
	// As crew ask --wait: the response is acknowledged, the task runs.
	if out := f.must("task", "show", "t1", "--json"); !strings.Contains(out, `"status":"running"`) {
		t.Fatalf("task after the answer: %s", out)
	}
	if out := f.must("pending", "--task", "t1", "--json"); strings.TrimSpace(out) != "" {
		t.Fatalf("t1 still has open messages: %s", out)
	}
	// A tool's structured output is what the command prints with --json.
	rep := mcpCall(t, f.ctx, cs, "crew_report", map[string]any{"body": "-n is a body, not a flag"})
	var cli map[string]any
	line := f.must("outbox", "--json")
	if err := json.Unmarshal([]byte(line), &cli); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"status", "deliveredAt", "deliveredVia"} { // outbox marks it delivered
		delete(cli, k)
		delete(rep, k)
	}
	if a, b := mustJSON(t, rep), mustJSON(t, cli); a != b {
		t.Fatalf("crew_report returned\n%s\nthe CLI prints\n%s", a, b)
	}
}

func testMCPLeader(t *testing.T, f *mcpFixture) {
	cs := f.session(nil)
	mcpCall(t, f.ctx, cs, "crew_task_add", map[string]any{"id": "t2", "title": "write NOTES.md"})
	f.must("task", "start", "--task", "t2")
	worker := exec.CommandContext(f.ctx, f.bin, "ask", "Which license?", "--wait", "--task", "t2")
	worker.Dir, worker.Env = f.dir, f.env
	var out strings.Builder
	worker.Stdout = &out
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	var question string
	for question == "" {
		p := mcpCall(t, f.ctx, cs, "crew_pending", nil)
		for _, rec := range p["pending"].([]any) {
			if r := rec.(map[string]any); r["kind"] == "question" && r["task"] == "t2" {
				question = r["body"].(string)
			}
		}
		if question == "" {
			time.Sleep(20 * time.Millisecond) // the worker has not asked yet
		}
	}
	if question != "Which license?" {
		t.Fatalf("pending question %q", question)
	}
	mcpCall(t, f.ctx, cs, "crew_respond", map[string]any{"task": "t2", "body": "MIT."})
	if err := worker.Wait(); err != nil {
		t.Fatalf("crew ask --wait: %v", err)
	}
	if out.String() != "MIT.\n" {
		t.Fatalf("the worker printed %q", out.String())
	}
	// A steer from the leader over MCP reaches the worker's inbox.
	mcpCall(t, f.ctx, cs, "crew_steer", map[string]any{"task": "t2", "body": "Use SPDX headers.", "priority": "urgent"})
	if got := f.must("inbox", "--task", "t2", "--json"); !strings.Contains(got, `"Use SPDX headers."`) {
		t.Fatalf("worker inbox: %s", got)
	}
	// Errors are results naming the class, and the server goes on.
	res := mcpTry(t, f.ctx, cs, "crew_respond", map[string]any{"task": "t2", "body": "again"})
	if !res.IsError || !strings.HasPrefix(mcpText(res), "conflict (exit 3): ") {
		t.Fatalf("respond to a running task: %s", mcpText(res))
	}
	res = mcpTry(t, f.ctx, cs, "crew_task_show", map[string]any{"task": "nope"})
	if !res.IsError || !strings.HasPrefix(mcpText(res), "not_found (exit 4): ") {
		t.Fatalf("show a missing task: %s", mcpText(res))
	}
	res = mcpTry(t, f.ctx, cs, "crew_task_add", map[string]any{"id": "bad id"})
	if !res.IsError || !strings.HasPrefix(mcpText(res), "invalid (exit 2): ") {
		t.Fatalf("add a bad id: %s", mcpText(res))
	}
	// The server keeps the run's state between tool calls; a command line
	// (another process) that writes the run in between is seen by the
	// next call: its steer takes the next seq, and a task the command line
	// completed is one the server cannot complete again.
	ours := mcpCall(t, f.ctx, cs, "crew_steer", map[string]any{"task": "t2", "body": "first, over MCP"})
	theirs := e2eJSONLines[events.Message](t, f.must("--json", "steer", "t2", "second, by the command line"))[0]
	next := mcpCall(t, f.ctx, cs, "crew_steer", map[string]any{"task": "t2", "body": "third, over MCP"})
	if ours["seq"] != float64(theirs.Seq-1) || next["seq"] != float64(theirs.Seq+1) {
		t.Fatalf("steers over MCP at seq %v and %v around the command line's %d; want the ones on either side", ours["seq"], next["seq"], theirs.Seq)
	}
	f.must("task", "complete", "--task", "t2")
	res = mcpTry(t, f.ctx, cs, "crew_task_complete", map[string]any{"task": "t2"})
	if !res.IsError || !strings.HasPrefix(mcpText(res), "conflict (exit 3): ") {
		t.Fatalf("complete over MCP a task the command line completed: %s", mcpText(res))
	}
}

func testMCPCancelledAsk(t *testing.T, f *mcpFixture) {
	f.must("task", "add", "t3")
	cs := f.session(nil, "CREW_TASK=t3")
	mcpCall(t, f.ctx, cs, "crew_task_start", nil)
	next := f.follow()
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "crew_ask", Arguments: map[string]any{"question": "May I delete vendor/?", "wait": true}})
		done <- err
	}()
	q := next()
	cancel() // the client sends notifications/cancelled
	if err := <-done; err == nil {
		t.Fatal("a cancelled crew_ask returned no error")
	}
	// The question stays open, exactly as after Ctrl-C on crew ask --wait.
	var task state.Task
	if err := json.Unmarshal([]byte(f.must("task", "show", "t3", "--json")), &task); err != nil {
		t.Fatal(err)
	}
	if task.Status != "waiting" || task.Question != q.ID {
		t.Fatalf("after the cancelled ask: %+v, want waiting on %s", task, q.ID)
	}
	// The same session goes on; the answer can still be awaited.
	f.must("respond", "t3", "No.")
	m := mcpCall(t, f.ctx, cs, "crew_await", map[string]any{"question_id": q.ID})
	if m["body"] != "No." {
		t.Fatalf("crew_await: %v", m)
	}
}

// mcpTools is every tool crew mcp has: the command line's operations.
var mcpTools = []string{
	"crew_ack", "crew_ask", "crew_await", "crew_broadcast", "crew_events", "crew_follow_up", "crew_heartbeat", "crew_inbox",
	"crew_mail_check", "crew_mail_read", "crew_mail_send", "crew_nudge", "crew_outbox", "crew_pending",
	"crew_reject", "crew_report", "crew_respond", "crew_run_create", "crew_run_list", "crew_run_report",
	"crew_run_show", "crew_run_stop", "crew_run_wait", "crew_steer", "crew_task_add", "crew_task_cancel", "crew_task_complete",
	"crew_task_fail", "crew_task_list", "crew_task_retry", "crew_task_show", "crew_task_start", "crew_task_verify",
}

func testMCPEveryTool(t *testing.T, f *mcpFixture) {
	ctx := f.ctx
	lead := f.session(nil)
	var names []string
	for tool, err := range lead.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Description == "" || tool.InputSchema == nil {
			t.Errorf("%s: no description or input schema", tool.Name)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, mcpTools) {
		t.Fatalf("tools listed:\n%v\nwant\n%v", names, mcpTools)
	}
	called := map[string]bool{}
	call := func(cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
		t.Helper()
		called[name] = true
		return mcpCall(t, ctx, cs, name, args)
	}
	call(lead, "crew_run_create", map[string]any{"id": "r2", "title": "every tool"})
	call(lead, "crew_task_add", map[string]any{"run": "r1", "id": "w1", "title": "work", "done_when": "true"})
	call(lead, "crew_task_add", map[string]any{"id": "w2"})
	work := f.session(nil, "CREW_TASK=w1")
	call(work, "crew_task_start", nil)
	if hb := call(work, "crew_heartbeat", nil); hb["task"] != "w1" {
		t.Fatalf("crew_heartbeat: %v", hb)
	}
	q := call(work, "crew_ask", map[string]any{"question": "which?"})
	call(lead, "crew_respond", map[string]any{"task": "w1", "body": "this"})
	call(work, "crew_await", map[string]any{"question_id": q["id"]})
	steer := call(lead, "crew_steer", map[string]any{"task": "w1", "body": "s"})
	call(lead, "crew_follow_up", map[string]any{"task": "w1", "body": "f"})
	call(lead, "crew_nudge", map[string]any{"task": "w1"})
	call(lead, "crew_broadcast", map[string]any{"body": "b"})
	in := call(work, "crew_inbox", nil)
	if len(in["messages"].([]any)) != 4 {
		t.Fatalf("crew_inbox: %v", in)
	}
	for _, m := range in["messages"].([]any) { // recorded as delivered over MCP
		if m := m.(map[string]any); m["status"] != "delivered" || m["deliveredVia"] != "mcp" {
			t.Fatalf("crew_inbox message %v: want delivered via mcp", m)
		}
	}
	call(work, "crew_ack", map[string]any{"ids": []string{steer["id"].(string)}})
	p := call(work, "crew_pending", nil)
	follow := p["pending"].([]any)[0].(map[string]any)
	call(work, "crew_reject", map[string]any{"id": follow["id"], "reason": "later"})
	rep := call(work, "crew_report", map[string]any{"body": "r", "priority": "urgent"})
	if out := call(lead, "crew_outbox", map[string]any{"unread": true}); len(out["messages"].([]any)) != 1 {
		t.Fatalf("crew_outbox: %v", out)
	}
	call(lead, "crew_ack", map[string]any{"ids": []string{rep["id"].(string)}})
	call(work, "crew_task_verify", nil)
	if tk := call(work, "crew_task_complete", nil); tk["status"] != "completed" {
		t.Fatalf("crew_task_complete: %v", tk)
	}
	call(lead, "crew_task_fail", map[string]any{"task": "w2", "reason": "not needed"})
	call(lead, "crew_task_retry", map[string]any{"task": "w2"})
	call(lead, "crew_task_cancel", map[string]any{"task": "w2", "reason": "done without it"})
	if ts := call(lead, "crew_task_list", nil); len(ts["tasks"].([]any)) != 2 {
		t.Fatalf("crew_task_list: %v", ts)
	}
	call(lead, "crew_task_show", map[string]any{"task": "w1"})
	if rs := call(lead, "crew_run_list", nil); len(rs["runs"].([]any)) != 2 {
		t.Fatalf("crew_run_list: %v", rs)
	}
	call(lead, "crew_run_show", nil)
	if rep := call(lead, "crew_run_report", nil); rep["tasks"] == nil {
		t.Fatalf("crew_run_report: %v", rep)
	}
	called["crew_run_report"] = true
	if res := mcpTry(t, ctx, lead, "crew_run_report", map[string]any{"format": "markdown"}); res.IsError || !strings.Contains(mcpText(res), "w1") {
		t.Fatalf("crew_run_report markdown: %s", mcpText(res))
	}
	// w2 was cancelled: the run ended, not all completed (exit 6); the
	// run's record comes with the error, as crew run wait --json prints it.
	if res := mcpTry(t, ctx, lead, "crew_run_wait", map[string]any{"timeout": "1m"}); !res.IsError || !strings.HasPrefix(mcpText(res), "incomplete (exit 6)") ||
		!strings.Contains(mcpText(res), "printed before the error:\n{") || !strings.Contains(mcpText(res), `"status":"cancelled"`) {
		t.Fatalf("crew_run_wait: %s", mcpText(res))
	}
	called["crew_run_wait"] = true
	if st := call(lead, "crew_run_stop", nil); st["run"] != "r1" || len(st["cancelled"].([]any)) != 0 {
		t.Fatalf("crew_run_stop: %v", st)
	}
	if ev := call(lead, "crew_events", map[string]any{"types": []string{"task.completed"}}); len(ev["events"].([]any)) != 1 {
		t.Fatalf("crew_events: %v", ev)
	}
	mail := call(lead, "crew_mail_send", map[string]any{"to": "reviewer", "from": "builder", "body": "PR #12 is ready", "create_recipient": true})
	if ms := call(lead, "crew_mail_check", map[string]any{"agent": "reviewer", "unread": true}); len(ms["mail"].([]any)) != 1 {
		t.Fatalf("crew_mail_check: %v", ms)
	}
	if ms := call(lead, "crew_mail_read", map[string]any{"agent": "reviewer", "ids": []string{mail["id"].(string)}}); len(ms["mail"].([]any)) != 1 {
		t.Fatalf("crew_mail_read: %v", ms)
	}
	for _, name := range mcpTools {
		if !called[name] {
			t.Errorf("%s was not called", name)
		}
	}
}

// testMCPResources: a worker's server lists crew://inbox and
// crew://pending; reading them marks nothing delivered; a subscription to
// crew://inbox hears of a steer sent by the command line (the run's
// watch), and of nothing when an unrelated change leaves the inbox as it
// was.
func testMCPResources(t *testing.T, f *mcpFixture) {
	f.must("task", "add", "t1")
	f.must("task", "add", "t2")
	updated := make(chan string, 16)
	cs := f.sessionWith(&mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updated <- req.Params.URI
	}}, "CREW_TASK=t1")
	list, err := cs.ListResources(f.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range list.Resources {
		uris = append(uris, r.URI)
	}
	slices.Sort(uris)
	if want := []string{"crew://inbox", "crew://pending"}; !slices.Equal(uris, want) {
		t.Fatalf("resources %v, want %v", uris, want)
	}
	read := func(uri string) []events.Message {
		t.Helper()
		res, err := cs.ReadResource(f.ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		var out struct{ Pending []events.Message }
		if err := json.Unmarshal([]byte(res.Contents[0].Text), &out); err != nil {
			t.Fatalf("read %s: %v: %q", uri, err, res.Contents[0].Text)
		}
		return out.Pending
	}
	if got := read("crew://inbox"); len(got) != 0 {
		t.Fatalf("inbox before any message: %+v", got)
	}
	if err := cs.Subscribe(f.ctx, &mcp.SubscribeParams{URI: "crew://inbox"}); err != nil {
		t.Fatal(err)
	}
	// A change that leaves t1's inbox as it was (a steer to t2) is not an
	// update of it; the steer to t1 that follows is.
	f.must("task", "start", "t2")
	f.must("steer", "t2", "not for t1")
	steer := strings.TrimSpace(f.must("steer", "t1", "use the new API"))
	if uri := <-updated; uri != "crew://inbox" {
		t.Fatalf("update of %s, want crew://inbox", uri)
	}
	got := read("crew://inbox")
	if len(got) != 1 || got[0].ID != steer || got[0].Status != "pending" {
		t.Fatalf("inbox after the steer: %+v; want the steer %s, still pending (reading marks nothing delivered)", got, steer)
	}
	// One more steer, one more update, and none in between: the server
	// sends its notifications in the order of the changes, so any for the
	// unrelated ones would have come before this one.
	f.must("follow-up", "t1", "then the docs")
	if uri := <-updated; uri != "crew://inbox" {
		t.Fatalf("update of %s, want crew://inbox", uri)
	}
	if n := len(updated); n != 0 {
		t.Fatalf("%d updates more than the two changes of the inbox", n)
	}
	// crew://pending is the leader's list, whoever the server acts for.
	mcpCall(t, f.ctx, cs, "crew_task_start", nil)
	rep := mcpCall(t, f.ctx, cs, "crew_report", map[string]any{"body": "halfway", "priority": "high"})
	if p := read("crew://pending"); len(p) != 1 || p[0].ID != rep["id"] || len(read("crew://inbox")) != 2 {
		t.Fatalf("leader's pending %+v, want the report %v", p, rep["id"])
	}
	if _, err := cs.ReadResource(f.ctx, &mcp.ReadResourceParams{URI: "crew://nope"}); err == nil {
		t.Fatal("reading an unknown resource succeeded")
	}
}

// TestMCPInspector drives the built binary with the official MCP
// Inspector's command-line mode (npm @modelcontextprotocol/inspector,
// which .ci/run installs and names in CREW_MCP_INSPECTOR): it lists every
// tool, calls one and reads a resource, as a client that is not the Go
// SDK sees them.
func TestMCPInspector(t *testing.T) {
	inspector := os.Getenv("CREW_MCP_INSPECTOR")
	if inspector == "" {
		var err error
		if inspector, err = exec.LookPath("mcp-inspector"); err != nil {
			t.Skip("no MCP Inspector: set CREW_MCP_INSPECTOR to its mcp-inspector (npm install @modelcontextprotocol/inspector; .ci/run does)")
		}
	}
	t.Parallel()
	bin := buildCrew(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eBound)
	defer cancel()
	f := newMCPFixture(t, ctx, bin)
	f.must("task", "add", "t1", "--title", "inspected")
	inspect := func(v any, args ...string) {
		t.Helper()
		line := append([]string{"--cli", "-e", "CREW_DIR=" + filepath.Join(f.dir, ".crew"), "-e", "CREW_RUN=r1"}, args...)
		cmd := exec.CommandContext(ctx, inspector, line...)
		cmd.Dir, cmd.Env = f.dir, f.env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("mcp-inspector %v: %v\n%s", args, err, out)
		}
		if err := json.Unmarshal(out, v); err != nil {
			t.Fatalf("mcp-inspector %v: %v\n%s", args, err, out)
		}
	}
	var list struct{ Tools []struct{ Name string } }
	inspect(&list, bin, "mcp", "--method", "tools/list")
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, mcpTools) {
		t.Fatalf("the Inspector lists\n%v\nwant\n%v", names, mcpTools)
	}
	var call struct {
		IsError           bool
		StructuredContent struct{ ID, Status string }
	}
	inspect(&call, "-e", "CREW_TASK=t1", bin, "mcp", "--method", "tools/call", "--tool-name", "crew_task_start")
	if call.IsError || call.StructuredContent.ID != "t1" || call.StructuredContent.Status != "running" {
		t.Fatalf("crew_task_start through the Inspector: %+v", call)
	}
	f.must("steer", "t1", "steered")
	var read struct{ Contents []struct{ URI, Text string } }
	inspect(&read, "-e", "CREW_TASK=t1", bin, "mcp", "--method", "resources/read", "--uri", "crew://inbox")
	if len(read.Contents) != 1 || !strings.Contains(read.Contents[0].Text, `"body":"steered"`) {
		t.Fatalf("crew://inbox through the Inspector: %+v", read)
	}
}

// TestMCPOneStoreConnection: crew mcp --store keeps one connection to the
// NATS server for all of its tool calls and its change notifications,
// and after the server restarts its tool calls still work, on the one
// connection the client made again.
func TestMCPOneStoreConnection(t *testing.T) {
	t.Parallel()
	bin := buildCrew(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eBound)
	defer cancel()
	srv := natstest.Server(t)
	f := &mcpFixture{&e2eLeader{t: t, ctx: ctx, bin: bin, dir: t.TempDir(),
		env: e2eEnv(filepath.Dir(bin), "CREW_STORE="+srv.ClientURL(), "CREW_RUN=r1")}}
	f.must("run", "create", "--id", "r1")
	f.must("task", "add", "t1")
	f.must("task", "start", "t1")
	// The connections crew made so far were the commands above.
	after := uint64(0)
	for _, c := range crewConns(t, srv, 0) {
		after = max(after, c.Cid)
	}
	cs := f.session(nil)
	call := func(round int) {
		t.Helper()
		for i := range 3 {
			body := fmt.Sprintf("steer %d.%d", round, i)
			if out := mcpCall(t, ctx, cs, "crew_steer", map[string]any{"task": "t1", "body": body}); out["seq"] == nil {
				t.Fatalf("crew_steer: no seq in %v", out)
			}
			if out := mcpCall(t, ctx, cs, "crew_task_show", map[string]any{"task": "t1"}); out["status"] != "running" {
				t.Fatalf("crew_task_show: %v, want status running", out)
			}
		}
	}
	call(1)
	if conns := crewConns(t, srv, after); len(conns) != 1 {
		t.Errorf("crew mcp made %d connections for 6 tool calls, want 1", len(conns))
	}
	srv = natstest.Restart(t, srv)
	call(2)
	if conns := crewConns(t, srv, 0); len(conns) != 1 || conns[0].Stop != nil {
		t.Errorf("after the server restarted, crew mcp made %d connections for 6 tool calls, want 1 still open", len(conns))
	}
}

// crewConns returns the connections, open or closed, that crew processes
// (client name "crew") made to srv after the one with client id after.
func crewConns(t *testing.T, srv *server.Server, after uint64) []*server.ConnInfo {
	t.Helper()
	cz, err := srv.Connz(&server.ConnzOptions{State: server.ConnAll, Limit: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	var out []*server.ConnInfo
	for _, c := range cz.Conns {
		if c.Name == "crew" && c.Cid > after {
			out = append(out, c)
		}
	}
	return out
}
