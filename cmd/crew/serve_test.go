//go:build !crew_lite

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crew-dev/crew/web"
)

// served is a running crew serve: the URLs its --json line gives.
type served struct {
	URL   string `json:"url"`
	MCP   string `json:"mcp"`
	Hooks string `json:"hooks"`
	stop  func()
}

// startServe starts bin's crew serve --json on any free port of the
// loopback, with the e2e leader's environment and extra, and returns
// its URLs once it listens. The server stops at the test's end, or
// with stop.
func startServe(t *testing.T, l *e2eLeader, extra ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(l.ctx)
	cmd := exec.CommandContext(ctx, l.bin, "serve", "--addr", "127.0.0.1:0", "--json")
	cmd.Dir, cmd.Env = l.dir, append(append([]string{}, l.env...), extra...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() { cancel(); cmd.Wait() }
	t.Cleanup(stop)
	sc := bufio.NewScanner(out)
	var s served
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &s) != nil {
		stop()
		t.Fatalf("crew serve --json printed %q (stderr %s)", sc.Text(), stderr.String())
	}
	go io.Copy(io.Discard, out)
	s.stop = stop
	return &s
}

// The official MCP conformance suite, server mode, against crew serve's
// /mcp at the URL crew serve prints, as given: every server scenario of
// the suite, the pending ones too (--suite all), but those
// of the expected-failures file (the suite's own fixture tools) passes.
// CREW_MCP_CONFORMANCE is the suite's conformance command, with a Node
// ≥ 22 beside it (.ci/run installs both).
func TestMCPConformance(t *testing.T) {
	suite := os.Getenv("CREW_MCP_CONFORMANCE")
	if suite == "" {
		t.Skip("no MCP conformance suite: set CREW_MCP_CONFORMANCE to its conformance command (npm install @modelcontextprotocol/conformance@0.1.16 node@22; .ci/run does)")
	}
	t.Parallel()
	bin := buildCrew(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eBound)
	defer cancel()
	f := newMCPFixture(t, ctx, bin)
	s := startServe(t, f.e2eLeader)
	baseline, err := filepath.Abs("testdata/mcp-conformance-expected-failures.yml")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, suite, "server", "--suite", "all", "--url", s.MCP, "--expected-failures", baseline, "-o", t.TempDir())
	// The suite's node: node@22 installs it beside conformance.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(suite)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("conformance server --url %s: %v\n%s", s.MCP, err, out)
	}
	if i := strings.Index(string(out), "=== SUMMARY ==="); i >= 0 {
		t.Logf("%s", out[i:])
	}
}

// Claude Code's HTTP hook exchange with the real crew serve, by its
// documented request and response JSON: the token from CREW_TOKEN as a
// bearer token, the identity in headers. A hook posted while the
// server is down (connection refused: Claude Code goes on without an
// answer) marks nothing, and the steer arrives at the next hook, once
// the server is back with the same token.
func TestHTTPHookServerDown(t *testing.T) {
	t.Parallel()
	bin := buildCrew(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eBound)
	defer cancel()
	f := newMCPFixture(t, ctx, bin)
	f.must("task", "add", "t1", "--title", "hooked")
	token := web.NewToken()
	s := startServe(t, f.e2eLeader, "CREW_TOKEN="+token)
	post := func(url string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"claude/PostToolUse", strings.NewReader(`{"session_id":"s1","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_response":{"stdout":""}}`))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Crew-Run", "r1")
		req.Header.Set("X-Crew-Task", "t1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	if code, body, err := post(s.Hooks); err != nil || code != 200 || body != "" {
		t.Fatalf("hook with nothing to deliver: %d %q %v; want 200 and an empty body", code, body, err)
	}
	s.stop()
	f.must("steer", "t1", "switch to the v2 API")
	if _, _, err := post(s.Hooks); err == nil {
		t.Fatalf("hook to a stopped crew serve got an answer")
	}
	if out := f.must("inbox", "--task", "t1", "--peek", "--json"); !strings.Contains(out, `"status":"pending"`) {
		t.Fatalf("steer after the hook to a stopped server: %s; want pending", out)
	}
	s = startServe(t, f.e2eLeader, "CREW_TOKEN="+token)
	code, body, err := post(s.Hooks)
	var answer struct {
		HookSpecificOutput struct{ HookEventName, AdditionalContext string }
	}
	if err != nil || code != 200 || json.Unmarshal([]byte(body), &answer) != nil || !strings.Contains(answer.HookSpecificOutput.AdditionalContext, "switch to the v2 API") {
		t.Fatalf("hook once the server is back: %d %q %v; want the steer as additionalContext", code, body, err)
	}
	// The delivery is recorded once the answer is out: wait for it.
	out := f.must("inbox", "--task", "t1", "--peek", "--json")
	for end := time.Now().Add(10 * time.Second); !strings.Contains(out, `"deliveredVia":"http-hook:tool-result"`) && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
		out = f.must("inbox", "--task", "t1", "--peek", "--json")
	}
	if !strings.Contains(out, `"deliveredVia":"http-hook:tool-result"`) {
		t.Fatalf("steer after the hook: %s; want delivered via http-hook:tool-result", out)
	}
}

// The HTTP hooks answer and record exactly as the command hooks: two
// tasks in the same state, one served by crew hook claude EVENT, the
// other by crew serve's /hooks/claude/EVENT, get the same answer at each
// moment (the task's id and the messages' ids aside), and their messages
// the same delivery records but for the door (hook: or http-hook:).
func TestHTTPHooksAnswerAsCommandHooks(t *testing.T) {
	t.Parallel()
	bin := buildCrew(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eBound)
	defer cancel()
	f := newMCPFixture(t, ctx, bin)
	token := web.NewToken()
	s := startServe(t, f.e2eLeader, "CREW_TOKEN="+token)
	for _, task := range []string{"t1", "t2"} {
		f.must("task", "add", task, "--title", "same")
		f.must("task", "start", task, "--task", task)
	}
	ids := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	norm := func(s, task string) string {
		return ids.ReplaceAllString(strings.ReplaceAll(s, task, "TASK"), "ID")
	}
	for _, ev := range []struct{ name, input, before string }{
		{"SessionStart", `{"hook_event_name":"SessionStart","source":"startup","session_id":"s"}`, "steer"},
		{"PostToolUse", `{"hook_event_name":"PostToolUse","session_id":"s"}`, "steer"},
		{"PostToolUse", `{"hook_event_name":"PostToolUse","session_id":"s"}`, ""},
		{"UserPromptSubmit", `{"hook_event_name":"UserPromptSubmit","session_id":"s"}`, "follow-up"},
		{"Stop", `{"hook_event_name":"Stop","session_id":"s","stop_hook_active":false}`, "follow-up"},
		{"Stop", `{"hook_event_name":"Stop","session_id":"s","stop_hook_active":true}`, ""},
	} {
		if ev.before != "" {
			for _, task := range []string{"t1", "t2"} {
				f.must(ev.before, task, "before "+ev.name)
			}
		}
		cmd := exec.CommandContext(ctx, bin, "hook", "claude", ev.name)
		cmd.Dir, cmd.Env = f.dir, append(append([]string{}, f.env...), "CREW_TASK=t1")
		cmd.Stdin = strings.NewReader(ev.input)
		byCommand, err := cmd.Output()
		if err != nil {
			t.Fatalf("crew hook claude %s: %v", ev.name, err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.Hooks+"claude/"+ev.name, strings.NewReader(ev.input))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Crew-Run", "r1")
		req.Header.Set("X-Crew-Task", "t2")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		byHTTP, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got, want := norm(string(byHTTP), "t2"), norm(strings.TrimSpace(string(byCommand)), "t1"); got != want {
			t.Fatalf("%s (%s sent before): over HTTP\n%s\nas a command\n%s", ev.name, ev.before, got, want)
		}
	}
	// The records: the same moments, through each door.
	records := func(task string) string {
		out := f.must("inbox", "--task", task, "--peek", "--json")
		var vias []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var m struct{ Body, DeliveredVia string }
			json.Unmarshal([]byte(line), &m)
			vias = append(vias, m.Body+": "+strings.TrimPrefix(m.DeliveredVia, "http-"))
		}
		return strings.Join(vias, "\n")
	}
	for end := time.Now().Add(10 * time.Second); records("t1") != records("t2") && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond) // an HTTP hook records after its answer
	}
	if a, b := records("t1"), records("t2"); a != b || !strings.Contains(a, "before PostToolUse: hook:tool-result") || !strings.Contains(a, "before Stop: hook:stop") {
		t.Fatalf("records of the command hooks:\n%s\nof the HTTP hooks (http- taken off):\n%s", a, b)
	}
}
