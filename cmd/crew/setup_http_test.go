package main

// crew setup --http: the hooks and the MCP server through crew serve,
// the token's variable named and never its value, and a setup without
// --http going back to command hooks.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSetupClaudeHTTP(t *testing.T) {
	dir := t.TempDir()
	makeSetupRoot(t, dir)
	t.Setenv("CREW_TOKEN", strings.Repeat("ab", 32))
	runSetup(t, dir, "claude", "--http", "--task", "t1", "http://127.0.0.1:7788/")
	settings := readJSON(t, filepath.Join(dir, ".claude", "settings.json"))
	hooks := settings["hooks"].(map[string]any)
	for _, ev := range hookAgents[0].Events {
		var http, wait int
		for _, g := range hooks[ev.Name].([]any) {
			for _, h := range g.(map[string]any)["hooks"].([]any) {
				h := h.(map[string]any)
				switch {
				case h["type"] == "http":
					http++
					headers := h["headers"].(map[string]any)
					if h["url"] != "http://127.0.0.1:7788/hooks/claude/"+ev.Name || headers["Authorization"] != "Bearer $CREW_TOKEN" ||
						headers["X-Crew-Task"] != "t1" || headers["X-Crew-Run"] != "$CREW_RUN" ||
						!strings.Contains(mustJSON(t, h["allowedEnvVars"]), `"CREW_TOKEN"`) {
						t.Errorf("%s's HTTP hook: %s", ev.Name, mustJSON(t, h))
					}
				case strings.Contains(h["command"].(string), " hook claude wait"):
					wait++
				default:
					t.Errorf("%s: a command hook beside the HTTP hook: %s", ev.Name, mustJSON(t, h))
				}
			}
		}
		if http != 1 {
			t.Errorf("%s: %d HTTP hooks; want 1", ev.Name, http)
		}
	}
	mcp := readJSON(t, filepath.Join(dir, ".mcp.json"))["mcpServers"].(map[string]any)["crew"].(map[string]any)
	if mcp["type"] != "http" || mcp["url"] != "http://127.0.0.1:7788/mcp" || !strings.Contains(mustJSON(t, mcp["headers"]), "${CREW_TOKEN}") {
		t.Errorf(".mcp.json's crew: %s", mustJSON(t, mcp))
	}
	for _, f := range []string{".claude/settings.json", ".mcp.json"} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); strings.Contains(string(b), strings.Repeat("ab", 32)) {
			t.Errorf("%s holds the token's value", f)
		}
	}
	// Back to command hooks: the HTTP hooks are crew's, replaced.
	runSetup(t, dir, "claude", "--task", "t1")
	if b, _ := os.ReadFile(filepath.Join(dir, ".claude", "settings.json")); strings.Contains(string(b), `"http"`) {
		t.Errorf("setup without --http kept HTTP hooks:\n%s", b)
	}
}

func TestSetupCodexHTTP(t *testing.T) {
	dir := t.TempDir()
	makeSetupRoot(t, dir)
	runSetup(t, dir, "codex", "--http", "--run", "r1")
	b, err := os.ReadFile(filepath.Join(dir, ".codex", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	want := "[mcp_servers.crew]\nurl = \"http://127.0.0.1:7777/mcp\"\nbearer_token_env_var = \"CREW_TOKEN\"\nhttp_headers = { \"X-Crew-Run\" = \"r1\" }\nenv_http_headers = { \"X-Crew-Task\" = \"CREW_TASK\", \"X-Crew-Agent\" = \"CREW_AGENT\" }\ntool_timeout_sec = 86400\n"
	if string(b) != want {
		t.Errorf(".codex/config.toml:\n%s\nwant\n%s", b, want)
	}
}
