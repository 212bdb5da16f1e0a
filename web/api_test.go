package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mcpserver"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/web"
)

// hook posts a Claude Code PostToolUse hook's input to the server as the
// agent of task, with header edits applying, and returns the status and
// body.
func (f *fixture) hook(t *testing.T, event, task string, edit func(*http.Request)) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.base+"/hooks/claude/"+event, strings.NewReader(`{"hook_event_name":"`+event+`","session_id":"s1"}`))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("X-Crew-Run", "r1")
	req.Header.Set("X-Crew-Task", task)
	if edit != nil {
		edit(req)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(b)
}

func (f *fixture) steer(t *testing.T, task, body string) *events.Message {
	t.Helper()
	m, err := f.run.Send(context.Background(), run.SendOptions{Kind: events.KindSteer, Task: task, From: "leader", Body: body})
	must(t, err)
	return m
}

func (f *fixture) message(t *testing.T, task, id string) events.Message {
	t.Helper()
	p, err := f.run.Pending(task)
	must(t, err)
	i := slices.IndexFunc(p.Messages, func(m events.Message) bool { return m.ID == id })
	if i < 0 {
		t.Fatalf("message %s not open for %s", id, task)
	}
	return p.Messages[i]
}

// An HTTP hook answers as crew hook does: the steer as additionalContext
// once, recorded as delivered by an HTTP hook, then nothing.
func TestHTTPHookDeliversOnce(t *testing.T) {
	f := newFixture(t)
	m := f.steer(t, "t1", "use the v2 API")
	code, body := f.hook(t, "PostToolUse", "t1", nil)
	var out struct {
		HookSpecificOutput struct{ HookEventName, AdditionalContext string }
	}
	if code != 200 || json.Unmarshal([]byte(body), &out) != nil || out.HookSpecificOutput.HookEventName != "PostToolUse" ||
		!strings.Contains(out.HookSpecificOutput.AdditionalContext, "use the v2 API") {
		t.Fatalf("hook: %d %q; want 200 and the steer as PostToolUse's additionalContext", code, body)
	}
	// The delivery is recorded once the answer is out: wait for it.
	got := f.message(t, "t1", m.ID)
	for end := time.Now().Add(5 * time.Second); got.Status == events.StatusPending && time.Now().Before(end); got = f.message(t, "t1", m.ID) {
		time.Sleep(5 * time.Millisecond)
	}
	if got.Status != events.StatusDelivered || got.DeliveredVia != events.ViaHTTPHook+":"+string(app.AtToolResult) {
		t.Fatalf("steer after the hook: %s via %q; want delivered via http-hook:tool-result", got.Status, got.DeliveredVia)
	}
	if code, body := f.hook(t, "PostToolUse", "t1", nil); code != 200 || body != "" {
		t.Fatalf("second hook: %d %q; want 200 and nothing", code, body)
	}
}

// Two PostToolUse hooks of one worker at once (Claude Code runs the hooks
// of parallel tool calls side by side) show a steer once between them: an
// HTTP hook answers before it records the delivery, so without taking
// turns the other read the steer as not yet delivered (the breaker saw 14
// pairs of 20 show it twice through crew serve).
func TestHTTPHookShowsASteerOnce(t *testing.T) {
	f := newFixture(t)
	for i := range 20 {
		body := fmt.Sprintf("steer number %d.", i)
		f.steer(t, "t1", body)
		var shown atomic.Int32
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if _, out := f.hook(t, "PostToolUse", "t1", nil); strings.Contains(out, body) {
					shown.Add(1)
				}
			})
		}
		wg.Wait()
		if n := shown.Load(); n != 1 {
			t.Fatalf("steer %d was shown by %d of two PostToolUse hooks sent at once; want 1", i, n)
		}
	}
}

// A request crew cannot answer is no silent 2xx: it says what is wrong.
func TestHTTPHookRefusals(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name, event, task string
		edit              func(*http.Request)
		code              int
		says              string
	}{
		{"unknown task", "PostToolUse", "t9", nil, 404, "t9"},
		{"unknown run", "PostToolUse", "t1", func(r *http.Request) { r.Header.Set("X-Crew-Run", "r9") }, 404, "r9"},
		{"bad task id", "PostToolUse", "../x", nil, 400, "task"},
		{"unknown event", "PreToolUse", "t1", nil, 400, "PreToolUse"},
		{"no token", "PostToolUse", "t1", func(r *http.Request) { r.Header.Del("Authorization") }, 401, "token"},
		{"wrong token", "PostToolUse", "t1", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+strings.Repeat("0", 64)) }, 401, "token"},
		{"another host", "PostToolUse", "t1", func(r *http.Request) { r.Host = "evil.example:80" }, 421, "host"},
		{"another origin", "PostToolUse", "t1", func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") }, 403, "origin"},
	} {
		code, body := f.hook(t, tc.event, tc.task, tc.edit)
		if code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %q; want %d naming %q", tc.name, code, body, tc.code, tc.says)
		}
	}
}

// A hook whose connection closed before its answer was written marks
// nothing: the steer is delivered at the next hook.
func TestHTTPHookDroppedConnectionLosesNothing(t *testing.T) {
	f := newFixture(t)
	m := f.steer(t, "t1", "stop and rebase")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the agent's connection is gone
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, f.base+"/hooks/claude/PostToolUse", strings.NewReader(`{"hook_event_name":"PostToolUse"}`))
	req.Host = strings.TrimPrefix(f.base, "http://")
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("X-Crew-Task", "t1")
	rec := httptest.NewRecorder()
	f.web.ServeHTTP(rec, req)
	if rec.Body.Len() != 0 {
		t.Fatalf("dropped hook wrote %q", rec.Body.String())
	}
	if got := f.message(t, "t1", m.ID); got.Status != events.StatusPending {
		t.Fatalf("steer after a dropped hook: %s; want pending", got.Status)
	}
	if code, body := f.hook(t, "PostToolUse", "t1", nil); code != 200 || !strings.Contains(body, "stop and rebase") {
		t.Fatalf("next hook: %d %q; want the steer", code, body)
	}
}

// MCP over Streamable HTTP at /mcp: the URL crew serve prints works as
// given; the tools are crew mcp's; each session acts as the identity it
// started with.
func TestMCPOverHTTP(t *testing.T) {
	f := newFixture(t)
	f.steer(t, "t1", "for t1 only")
	ctx := context.Background()
	updated := make(chan string, 10)
	connect := func(query string) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		}})
		s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.base + "/mcp?token=" + f.token + query}, nil)
		must(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	s1, s2 := connect("&run=r1&task=t1"), connect("&run=r1&task=t2")

	tools, err := s1.ListTools(ctx, nil)
	must(t, err)
	var got []string
	for _, tool := range tools.Tools {
		got = append(got, tool.Name)
	}
	want := stdioTools(t)
	if !slices.Equal(got, want) {
		t.Fatalf("tools over HTTP %v; want crew mcp's %v", got, want)
	}
	inbox := func(s *mcp.ClientSession) string {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "crew_inbox", Arguments: map[string]any{}})
		must(t, err)
		b, _ := json.Marshal(res.StructuredContent)
		return string(b)
	}
	if in1, in2 := inbox(s1), inbox(s2); !strings.Contains(in1, "for t1 only") || strings.Contains(in2, "for t1 only") {
		t.Fatalf("inbox of t1's session %s, of t2's %s; want the steer in t1's only", in1, in2)
	}

	// A subscription hears of a change (the run's wake-up).
	must(t, s1.Subscribe(ctx, &mcp.SubscribeParams{URI: "crew://inbox"}))
	f.steer(t, "t1", "a second steer")
	select {
	case uri := <-updated:
		if uri != "crew://inbox" {
			t.Fatalf("updated %s; want crew://inbox", uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no resources/updated after a steer to a subscribed inbox")
	}

	resp, err := http.Post(f.base+"/mcp", "application/json", strings.NewReader(`{}`))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/mcp without the token: %s; want 401", resp.Status)
	}
}

// MCP resource notifications over HTTP come from the run's wake-up as
// events are committed, not from Supervise's period (an hour here): a
// steer to a subscribed inbox, by another process or by a tool call of
// another session, a report to the leader and the leader's own
// acknowledgement of it for a subscribed pending list, are each heard of
// within seconds; a session subscribed to another task's inbox hears
// nothing of them.
func TestMCPNotificationsFollowTheLog(t *testing.T) {
	dir := t.TempDir()
	_, err := run.Init(dir, crew.PrivatePerm)
	must(t, err)
	root, err := run.FindKept(dir, crew.PrivatePerm)
	must(t, err)
	t.Cleanup(func() { root.Close() })
	f := newFixturePeriod(t, root, dir, web.Options{}, time.Hour)
	other, err := run.Find(dir, crew.PrivatePerm) // another process
	must(t, err)
	t.Cleanup(func() { other.Close() })
	o, err := other.Open("r1")
	must(t, err)
	ctx := context.Background()
	type note struct{ who, uri string }
	updated := make(chan note, 10)
	connect := func(who, query string) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- note{who, req.Params.URI}
		}})
		s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.base + "/mcp?token=" + f.token + query}, nil)
		must(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	s1, s2, lead := connect("t1", "&run=r1&task=t1"), connect("t2", "&run=r1&task=t2"), connect("leader", "&run=r1")
	must(t, s1.Subscribe(ctx, &mcp.SubscribeParams{URI: "crew://inbox"}))
	must(t, s2.Subscribe(ctx, &mcp.SubscribeParams{URI: "crew://inbox"}))
	must(t, lead.Subscribe(ctx, &mcp.SubscribeParams{URI: "crew://pending"}))
	// Within 0.7 s: less than the first rescan of a store.Waiter that is
	// not poked (a second), which would otherwise hide a watch that the
	// change does not wake.
	expect := func(want note, what string) {
		t.Helper()
		select {
		case got := <-updated:
			if got != want {
				t.Fatalf("after %s: %s heard of %s; want %s of %s", what, got.who, got.uri, want.who, want.uri)
			}
		case <-time.After(700 * time.Millisecond):
			t.Fatalf("after %s: no resources/updated for %s within 0.7 s (Supervise's rescan is an hour away)", what, want.who)
		}
	}

	_, err = o.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: run.Leader, Body: "from another process"})
	must(t, err)
	expect(note{"t1", "crew://inbox"}, "another process's steer to t1")

	res, err := lead.CallTool(ctx, &mcp.CallToolParams{Name: "crew_steer", Arguments: map[string]any{"task": "t1", "body": "from the leader's session"}})
	must(t, err)
	if res.IsError {
		t.Fatalf("crew_steer: %v", res.Content)
	}
	expect(note{"t1", "crew://inbox"}, "a steer to t1 through the leader's session")

	rep, err := o.Send(ctx, run.SendOptions{Kind: events.KindReport, Task: "t2", From: "t2", Body: "a report"})
	must(t, err)
	expect(note{"leader", "crew://pending"}, "t2's report to the leader")
	must(t, o.Acknowledge(ctx, run.Leader, []string{rep.ID}, false, ""))
	expect(note{"leader", "crew://pending"}, "the leader's acknowledgement of the report")
	select {
	case got := <-updated:
		t.Fatalf("%s heard of %s, which did not change", got.who, got.uri)
	case <-time.After(200 * time.Millisecond):
	}
}

// stdioTools are the tools crew mcp lists (mcpserver.New, in memory).
func stdioTools(t *testing.T) []string {
	ctx := context.Background()
	s := mcpserver.New(mcpserver.Options{App: app.New(func() (*run.Root, error) { return nil, nil }, app.Identity{})})
	st, ct := mcp.NewInMemoryTransports()
	_, err := s.Connect(ctx, st, nil)
	must(t, err)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	must(t, err)
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	must(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	return names
}
