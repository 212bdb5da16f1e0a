//go:build !crew_lite

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crew-dev/crew/internal/fakemodel"
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

// Claude Code's HTTP hooks, with the real claude binary against a
// scripted model (internal/fakemodel) and a real crew serve, set up by crew setup claude
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

	// Each Bash turn's Pick runs when the model is asked for it: the
	// first before the first tool call, the second after its PostToolUse
	// hook.
	const steer = "switch to the v2 API"
	bashAfter := func(step func()) fakemodel.Turn {
		return fakemodel.Turn{Pick: func([]string) (string, map[string]any) {
			step()
			return "Bash", map[string]any{"command": "echo step", "description": "a step"}
		}}
	}
	var stepErr error
	model := fakemodel.Start(t, fakemodel.Anthropic,
		bashAfter(func() { // the leader steers, crew serve goes down
			f.must("steer", "t1", steer)
			server.Process.Kill()
			server.Wait()
		}),
		bashAfter(func() { // the PostToolUse hook found no server: nothing delivered; crew serve is back
			if out := f.must("inbox", "--task", "t1", "--peek", "--json"); !strings.Contains(out, `"status":"pending"`) {
				stepErr = fmt.Errorf("after a hook to a stopped crew serve: %s; want the steer pending", out)
			}
			server = serve()
		}),
		fakemodel.Turn{Text: "done"})
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, ".claude.json"), []byte(`{"hasCompletedOnboarding":true,"projects":{`+mustJSONString(f.dir)+`:{"hasTrustDialogAccepted":true}}}`), 0o600)
	cmd := exec.CommandContext(ctx, claude, "-p", "do the task", "--output-format", "json", "--allowedTools", "Bash")
	cmd.Dir = f.dir
	cmd.Env = append(append([]string{}, f.env...), "HOME="+home, "CREW_TOKEN="+token, "CREW_TASK=t1",
		"ANTHROPIC_BASE_URL="+model.URL, "ANTHROPIC_API_KEY=sk-ant-test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude: %v\n%s", err, out)
	}
	if stepErr != nil {
		t.Fatal(stepErr)
	}
	seen := model.Main()
	if len(seen) < 3 || seen[1].Shows(steer) || !seen[2].Shows(steer) {
		t.Fatalf("the model's calls: %d; want the steer not in the second (its hook found crew serve down) and in the third\n%s", len(seen), out)
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
