//go:build !crew_lite

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crew-dev/crew/web"
)

// claudeBinary is the real Claude Code to test with: CREW_CLAUDE, else
// the real agents' cache that .ci/run installs (CREW_AGENTS, else
// ~/.cache/crew-agents), else claude on PATH.
func claudeBinary(t *testing.T) string {
	if p := os.Getenv("CREW_CLAUDE"); p != "" {
		return p
	}
	if dir := os.Getenv("CREW_AGENTS"); dir != "" {
		if p := filepath.Join(dir, "node_modules", ".bin", "claude"); fileExists(p) {
			return p
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		if p := filepath.Join(home, ".cache", "crew-agents", "node_modules", ".bin", "claude"); fileExists(p) {
			return p
		}
	}
	p, err := exec.LookPath("claude")
	if err != nil {
		t.Skip("no Claude Code: set CREW_CLAUDE to its claude binary")
	}
	return p
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// scriptedModel is an Anthropic Messages API that answers Claude Code's
// main loop from a script: each call's turn is the number of tool
// results so far; before answering, step(turn, request body) runs (the
// test's actions between the agent's hooks); turns below tools get a
// Bash tool call, then the text "done".
type scriptedModel struct {
	tools int
	step  func(turn int, body string)
	mu    sync.Mutex
	seen  []string // the request bodies of the main loop, in order
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":10}`)
		return
	}
	var req struct {
		Model    string
		Stream   bool
		Tools    []json.RawMessage
		Messages []struct {
			Content json.RawMessage
		}
	}
	json.Unmarshal(b, &req)
	turn := strings.Count(string(b), `"type":"tool_result"`)
	if len(req.Tools) > 0 {
		m.mu.Lock()
		m.seen = append(m.seen, string(b))
		m.mu.Unlock()
		if m.step != nil {
			m.step(turn, string(b))
		}
	}
	block := map[string]any{"type": "text", "text": "done"}
	stop := "end_turn"
	if len(req.Tools) > 0 && turn < m.tools {
		block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", turn), "name": "Bash", "input": map[string]any{"command": fmt.Sprintf("echo step%d", turn), "description": "a step"}}
		stop = "tool_use"
	}
	msg := map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": req.Model, "content": []any{block},
		"stop_reason": stop, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 5}}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(event string, data any) {
		d, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, d)
	}
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	send("message_start", map[string]any{"type": "message_start", "message": start})
	if block["type"] == "text" {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "done"}})
	} else {
		input, _ := json.Marshal(block["input"])
		send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": "Bash", "input": map[string]any{}}})
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	}
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// Claude Code's HTTP hooks, with the real claude binary against a
// scripted model and a real crew serve, set up by crew setup claude
// --http: a steer sent while crew serve is down is not lost by the
// PostToolUse hook that found the server down, and reaches the model
// through the next one, recorded as delivered by an HTTP hook. (The wait
// hook, a command that would deliver it first, is left out here.)
func TestClaudeHTTPHooks(t *testing.T) {
	claude := claudeBinary(t)
	t.Parallel()
	bin := buildCrew(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eBound)
	defer cancel()
	f := newMCPFixture(t, ctx, bin)
	f.must("task", "add", "t1", "--title", "hooked")
	f.must("task", "start", "t1", "--task", "t1")
	token := web.NewToken()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	serveEnv := []string{"CREW_TOKEN=" + token}
	serve := func() *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, "serve", "--addr", addr)
		cmd.Dir, cmd.Env = f.dir, append(append([]string{}, f.env...), serveEnv...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				break
			}
		}
		return cmd
	}
	server := serve()
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })
	f.must("setup", "claude", "--http", "http://"+addr, "--crew-path", bin)
	dropWaitHooks(t, filepath.Join(f.dir, ".claude", "settings.json"))

	var stepErr error
	model := &scriptedModel{tools: 2, step: func(turn int, body string) {
		switch turn {
		case 0: // before the first tool call: the leader steers, crew serve goes down
			f.must("steer", "t1", "switch to the v2 API")
			server.Process.Kill()
			server.Wait()
		case 1: // the PostToolUse hook found no server: nothing delivered; crew serve is back
			if out := f.must("inbox", "--task", "t1", "--peek", "--json"); !strings.Contains(out, `"status":"pending"`) || strings.Contains(body, "switch to the v2 API") {
				stepErr = fmt.Errorf("after a hook to a stopped crew serve: %s; want the steer pending and not shown", out)
			}
			server = serve()
		}
	}}
	api := httptest.NewServer(model)
	defer api.Close()
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, ".claude.json"), []byte(`{"hasCompletedOnboarding":true,"projects":{`+mustJSONString(f.dir)+`:{"hasTrustDialogAccepted":true}}}`), 0o600)
	cmd := exec.CommandContext(ctx, claude, "-p", "do the task", "--output-format", "json", "--allowedTools", "Bash")
	cmd.Dir = f.dir
	cmd.Env = append(append([]string{}, f.env...), "HOME="+home, "CREW_TOKEN="+token, "CREW_TASK=t1",
		"ANTHROPIC_BASE_URL="+api.URL, "ANTHROPIC_API_KEY=sk-ant-test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude: %v\n%s", err, out)
	}
	if stepErr != nil {
		t.Fatal(stepErr)
	}
	model.mu.Lock()
	seen := model.seen
	model.mu.Unlock()
	if len(seen) < 3 || !strings.Contains(seen[2], "switch to the v2 API") {
		t.Fatalf("the model's third call (after the second tool) does not carry the steer: %d calls\n%s", len(seen), out)
	}
	inbox := f.must("inbox", "--task", "t1", "--peek", "--json")
	if !strings.Contains(inbox, `"deliveredVia":"http-hook:tool-result"`) {
		t.Fatalf("steer after the run: %s; want delivered via http-hook:tool-result", inbox)
	}
}

// dropWaitHooks removes the wait hook (crew hook claude wait, a command)
// from Claude Code's settings at path.
func dropWaitHooks(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	hooks := doc["hooks"].(map[string]any)
	for ev, groups := range hooks {
		var keep []any
		for _, g := range groups.([]any) {
			if !strings.Contains(mustJSON(t, g), " hook claude wait") {
				keep = append(keep, g)
			}
		}
		hooks[ev] = keep
	}
	b, _ = json.Marshal(doc)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustJSONString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
