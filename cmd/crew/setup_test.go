package main

// crew setup against existing configuration files with the user's own
// content: unknown keys and other servers and hooks kept, a second run
// changes nothing, --dry-run writes nothing.

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// runSetup runs crew setup for the project dir, with crew on PATH (the
// test binary's copy testscript.Main puts there) as the crew the agent
// runs, so that setup's check of the hook it wrote runs it.
func runSetup(t *testing.T, dir string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := Main(append([]string{"crew", "setup", "--project", dir, "--crew-path", "crew"}, args...), strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("crew setup %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.String()
}

// makeSetupRoot makes a state root in dir with run r1 and its tasks t1 and
// t2.
func makeSetupRoot(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init"}, {"run", "create", "--id", "r1"}, {"task", "add", "t1", "--run", "r1"}, {"task", "add", "t2", "--run", "r1"}} {
		var stdout, stderr bytes.Buffer
		if code := Main(append([]string{"crew", "--dir", dir}, args...), strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("crew %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func TestSetupClaudeMergesAndIsIdempotent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".mcp.json"), `{"mcpServers": {"github": {"command": "gh-mcp"}}, "x-note": "mine"}`)
	writeFile(t, filepath.Join(dir, ".claude", "settings.json"), `{
  "permissions": {"allow": ["Bash(go test:*)"]},
  "hooks": {"PostToolUse": [{"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "gofmt -w ."}]}]}
}`)
	makeSetupRoot(t, dir)
	settings := filepath.Join(dir, ".claude", "settings.json")
	before, _ := os.ReadFile(settings)
	out := runSetup(t, dir, "claude", "--task", "t1", "--dry-run")
	if !strings.Contains(out, "would have updated") || !strings.Contains(out, "+ ") {
		t.Fatalf("--dry-run printed:\n%s", out)
	}
	if after, _ := os.ReadFile(settings); !bytes.Equal(before, after) {
		t.Fatal("--dry-run wrote settings.json")
	}
	out = runSetup(t, dir, "claude", "--task", "t1")
	if !strings.Contains(out, "updated "+filepath.Join(dir, ".mcp.json")) || !strings.Contains(out, "updated "+settings) {
		t.Fatalf("setup printed:\n%s", out)
	}
	mcpDoc := readJSON(t, filepath.Join(dir, ".mcp.json"))
	servers := mcpDoc["mcpServers"].(map[string]any)
	if servers["github"] == nil || mcpDoc["x-note"] != "mine" {
		t.Fatalf("user content lost: %v", mcpDoc)
	}
	crewServer := servers["crew"].(map[string]any)
	if crewServer["command"] != "crew" || mustJSON(t, crewServer["args"]) != `["mcp","--task","t1"]` {
		t.Fatalf("crew server: %v", crewServer)
	}
	doc := readJSON(t, settings)
	if doc["permissions"] == nil {
		t.Fatalf("permissions lost: %v", doc)
	}
	hooks := doc["hooks"].(map[string]any)
	post := hooks["PostToolUse"].([]any)
	if len(post) != 2 || !strings.Contains(mustJSON(t, post[0]), "gofmt") || !strings.Contains(mustJSON(t, post[1]), "crew hook claude PostToolUse --task t1") {
		t.Fatalf("PostToolUse hooks: %v", post)
	}
	for _, ev := range hookAgents[0].Events {
		if !strings.Contains(mustJSON(t, hooks[ev.Name]), "crew hook claude "+ev.Name) {
			t.Errorf("no crew hook for %s: %v", ev.Name, hooks[ev.Name])
		}
	}
	// Idempotent: a second run changes nothing.
	first, _ := os.ReadFile(settings)
	out = runSetup(t, dir, "claude", "--task", "t1")
	if strings.Count(out, "unchanged ") != 2 {
		t.Fatalf("second setup printed:\n%s", out)
	}
	if again, _ := os.ReadFile(settings); !bytes.Equal(first, again) {
		t.Fatal("a second setup changed settings.json")
	}
	// Another pin replaces crew's entries instead of adding to them.
	runSetup(t, dir, "claude", "--task", "t2")
	post = readJSON(t, settings)["hooks"].(map[string]any)["PostToolUse"].([]any)
	if len(post) != 2 || !strings.Contains(mustJSON(t, post[1]), "--task t2") {
		t.Fatalf("after --task t2: %v", post)
	}
}

// TestSetupGemini: one file, .gemini/settings.json, gets the MCP server
// and a hook per Gemini CLI event, next to the user's settings and hooks;
// a second run changes nothing.
func TestSetupGemini(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	makeSetupRoot(t, dir)
	settings := filepath.Join(dir, ".gemini", "settings.json")
	writeFile(t, settings, `{"theme": "GitHub", "mcpServers": {"db": {"command": "db-mcp"}},
  "hooks": {"AfterTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "gofmt -w ."}]}]}}`)
	out := runSetup(t, dir, "gemini", "--run", "r1", "--task", "t1")
	if !strings.HasPrefix(out, "updated "+settings+"\nchecked: the SessionStart hook runs") || !strings.Contains(out, "GEMINI_CLI_TRUST_WORKSPACE") {
		t.Fatalf("setup printed:\n%s", out)
	}
	doc := readJSON(t, settings)
	servers := doc["mcpServers"].(map[string]any)
	if doc["theme"] != "GitHub" || servers["db"] == nil {
		t.Fatalf("user content lost: %v", doc)
	}
	if got := mustJSON(t, servers["crew"]); got != `{"args":["mcp","--run","r1","--task","t1"],"command":"crew","trust":true}` {
		t.Fatalf("crew server: %s", got)
	}
	hooks := doc["hooks"].(map[string]any)
	after := hooks["AfterTool"].([]any)
	if len(after) != 2 || !strings.Contains(mustJSON(t, after[0]), "gofmt") {
		t.Fatalf("AfterTool hooks: %v", after)
	}
	if got := mustJSON(t, after[1]); got != `{"hooks":[{"command":"crew hook gemini AfterTool --run r1 --task t1 || exit 1","type":"command"}]}` {
		t.Fatalf("crew's AfterTool hook (no matcher: every tool): %s", got)
	}
	for _, ev := range []string{"SessionStart", "AfterAgent", "BeforeAgent"} {
		if !strings.Contains(mustJSON(t, hooks[ev]), "crew hook gemini "+ev+" --run r1") {
			t.Errorf("no crew hook for %s: %v", ev, hooks[ev])
		}
	}
	if out := runSetup(t, dir, "gemini", "--run", "r1", "--task", "t1"); !strings.HasPrefix(out, "unchanged "+settings+"\nchecked") {
		t.Fatalf("second setup printed:\n%s", out)
	}
	// A crew that cannot run fails the hook with exit 1, which Gemini CLI
	// shows as a warning and goes on from; the shell's 127 with "not
	// found" would be its "deny", blocking the turn (BeforeAgent) with
	// no word to the user.
	line := strings.Replace(hooks["BeforeAgent"].([]any)[0].(map[string]any)["hooks"].([]any)[0].(map[string]any)["command"].(string), "crew", filepath.Join(dir, "no-such-crew"), 1)
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Stdin = strings.NewReader(`{"hook_event_name":"BeforeAgent"}`)
	var ee *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("%s with crew missing: %v, want exit 1", line, err)
	}
}

func TestSetupClaudeRefusesBrokenJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".mcp.json"), `{"mcpServers": `)
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"crew", "setup", "claude", "--project", dir, "--crew-path", "crew"}, strings.NewReader(""), &stdout, &stderr); code != exitInvalid {
		t.Fatalf("exit %d, want %d: %s", code, exitInvalid, stderr.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".mcp.json")); string(b) != `{"mcpServers": ` {
		t.Fatal("a broken file was overwritten")
	}
}

func TestSetupCodexKeepsTheRestOfTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, ".codex", "config.toml")
	user := `# my settings
model = "gpt-5-codex"

[mcp_servers.github]
command = "gh-mcp"

[mcp_servers.crew]
command = "old-crew"

[mcp_servers.crew.env]
X = "1"

[profiles.fast]
model = "o4-mini"
`
	writeFile(t, path, user)
	makeSetupRoot(t, dir)
	runSetup(t, dir, "codex", "--run", "r1", "--task", "t1")
	b, _ := os.ReadFile(path)
	want := `# my settings
model = "gpt-5-codex"

[mcp_servers.github]
command = "gh-mcp"

[mcp_servers.crew]
command = "crew"
args = ["mcp", "--run", "r1", "--task", "t1"]
env_vars = ["CREW_DIR", "CREW_RUN", "CREW_TASK", "CREW_AGENT", "CREW_STORE", "CREW_NATS_CREDS", "CREW_NATS_TLS_CA", "CREW_NATS_REPLICAS"]
tool_timeout_sec = 86400
[profiles.fast]
model = "o4-mini"
`
	if string(b) != want {
		t.Fatalf("config.toml:\n%s\nwant\n%s", b, want)
	}
	if out := runSetup(t, dir, "codex", "--run", "r1", "--task", "t1"); !strings.HasPrefix(out, "unchanged ") {
		t.Fatalf("second setup: %s", out)
	}
	// A new file is created with the table alone.
	fresh := t.TempDir()
	makeSetupRoot(t, fresh)
	runSetup(t, fresh, "codex")
	if b, _ := os.ReadFile(filepath.Join(fresh, ".codex", "config.toml")); !strings.HasPrefix(string(b), "[mcp_servers.crew]\ncommand = \"crew\"\nargs = [\"mcp\"]\nenv_vars = [\"CREW_DIR\", \"CREW_RUN\", \"CREW_TASK\"") {
		t.Fatalf("new config.toml: %q", b)
	}
}

// TestSetupCodexHooks: crew setup codex writes .codex/hooks.json beside
// the MCP config, a crew hook codex per event next to the user's hooks,
// and says, also in --dry-run, what the user must trust (Codex ignores
// both files, silently, until then).
func TestSetupCodexHooks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	makeSetupRoot(t, dir)
	path := filepath.Join(dir, ".codex", "hooks.json")
	writeFile(t, path, `{"hooks":{"PostToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"./lint.sh"}]}]}}`)
	dry := runSetup(t, dir, "codex", "--run", "r1", "--task", "t1", "--dry-run")
	for _, want := range []string{"would have updated " + path, "crew hook codex Stop --run r1 --task t1", "--dangerously-bypass-hook-trust", "codex exec --trust"} {
		if !strings.Contains(dry, want) {
			t.Fatalf("dry run lacks %q:\n%s", want, dry)
		}
	}
	out := runSetup(t, dir, "codex", "--run", "r1", "--task", "t1")
	if !strings.Contains(out, "updated "+path) || !strings.Contains(out, "--dangerously-bypass-hook-trust") {
		t.Fatalf("setup said:\n%s", out)
	}
	var doc struct{ Hooks map[string][]any }
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, doc.Hooks["PostToolUse"]); got != `[{"hooks":[{"command":"./lint.sh","type":"command"}],"matcher":"Bash"},{"hooks":[{"command":"crew hook codex PostToolUse --run r1 --task t1","type":"command"}]}]` {
		t.Fatalf("PostToolUse hooks: %s", got)
	}
	for _, ev := range []string{"SessionStart", "Stop", "UserPromptSubmit"} {
		if got := mustJSON(t, doc.Hooks[ev]); got != `[{"hooks":[{"command":"crew hook codex `+ev+` --run r1 --task t1","type":"command"}]}]` {
			t.Fatalf("%s hooks: %s", ev, got)
		}
	}
}

// mustJSON marshals v (maps with their keys sorted).
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSetupClaudeCannotSilentlyFail: the hooks and the MCP server run
// the crew that ran setup by its absolute path; a pinned task that does
// not exist is refused (exit 4) and nothing is written; a crew the
// agent cannot run is reported (exit 1); crew's MCP tools are allowed;
// the wait hook is an asyncRewake hook on SessionStart, Stop and
// UserPromptSubmit, and PostToolUseFailure is answered as PostToolUse.
func TestSetupClaudeCannotSilentlyFail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	makeSetupRoot(t, dir)
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"crew", "setup", "--project", dir, "claude", "--run", "r1", "--task", "nope"}, strings.NewReader(""), &stdout, &stderr); code != exitNotFound {
		t.Fatalf("unknown task: exit %d, want %d: %s", code, exitNotFound, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, ".mcp.json")); err == nil {
		t.Fatal("setup for an unknown task wrote .mcp.json")
	}
	stdout.Reset()
	stderr.Reset()
	if code := Main([]string{"crew", "setup", "--project", dir, "--crew-path", filepath.Join(dir, "no-crew-here"), "claude", "--task", "t1"}, strings.NewReader(""), &stdout, &stderr); code != exitIO ||
		!strings.Contains(stderr.String(), "the SessionStart hook written does not run") {
		t.Fatalf("a crew that cannot run: exit %d: %s", code, stderr.String())
	}
	bin, err := exec.LookPath("crew")
	if err != nil {
		t.Fatal(err)
	}
	// The default: this crew's absolute path (the test binary's copy
	// called crew on PATH, run as crew).
	stdout.Reset()
	stderr.Reset()
	main := []string{"crew", "setup", "--project", dir, "claude", "--run", "r1", "--task", "t1"}
	if code := runAs(bin, func() int { return Main(main, strings.NewReader(""), &stdout, &stderr) }); code != 0 {
		t.Fatalf("setup: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "checked: the SessionStart hook runs ("+bin+")") || !strings.Contains(stdout.String(), "next:") {
		t.Fatalf("setup printed:\n%s", stdout.String())
	}
	server := readJSON(t, filepath.Join(dir, ".mcp.json"))["mcpServers"].(map[string]any)["crew"].(map[string]any)
	if server["command"] != bin {
		t.Fatalf("MCP server command %v, want %s", server["command"], bin)
	}
	doc := readJSON(t, filepath.Join(dir, ".claude", "settings.json"))
	if got := mustJSON(t, doc["permissions"]); got != `{"allow":["mcp__crew__*"]}` {
		t.Fatalf("permissions: %s", got)
	}
	if got := mustJSON(t, doc["enabledMcpjsonServers"]); got != `["crew"]` {
		t.Fatalf("enabledMcpjsonServers: %s", got)
	}
	hooks := doc["hooks"].(map[string]any)
	if got := mustJSON(t, hooks["PostToolUseFailure"]); got != `[{"hooks":[{"command":"`+bin+` hook claude PostToolUseFailure --run r1 --task t1","type":"command"}],"matcher":"*"}]` {
		t.Fatalf("PostToolUseFailure: %s", got)
	}
	wait := `{"hooks":[{"async":true,"asyncRewake":true,"command":"` + bin + ` hook claude wait --run r1 --task t1","timeout":86400,"type":"command"}]}`
	for _, ev := range []string{"SessionStart", "Stop", "UserPromptSubmit"} {
		groups := hooks[ev].([]any)
		if len(groups) != 2 || mustJSON(t, groups[1]) != wait {
			t.Errorf("%s: %s; want crew's hook, then %s", ev, mustJSON(t, groups), wait)
		}
	}
	if hooks["PostToolUse"].([]any)[0].(map[string]any)["hooks"].([]any)[0].(map[string]any)["asyncRewake"] != nil {
		t.Error("PostToolUse has a wait hook")
	}
}

// runAs runs f with os.Args[0] set to name (crew's selfPath reads it).
func runAs(name string, f func() int) int {
	old := os.Args[0]
	os.Args[0] = name
	defer func() { os.Args[0] = old }()
	return f()
}

// TestSetupLeader: a leader's session is set up with --as and the run's
// leader's name (its brief checked); an agent name that leads no run
// would get nothing from the hooks, and setup says so (exit 1).
func TestSetupLeader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	makeSetupRoot(t, dir)
	out := runSetup(t, dir, "claude", "--as", "leader", "--run", "r1")
	if !strings.Contains(out, "checked: the SessionStart hook runs (crew)") {
		t.Fatalf("setup printed:\n%s", out)
	}
	var stdout, stderr bytes.Buffer
	code := Main([]string{"crew", "setup", "--project", dir, "--crew-path", "crew", "claude", "--as", "bob", "--run", "r1"}, strings.NewReader(""), &stdout, &stderr)
	if code != exitIO || !strings.Contains(stderr.String(), "it gave no brief for the pinned identity") {
		t.Fatalf("--as bob: exit %d: %s", code, stderr.String())
	}
}

// TestSetupPinsARootOutsideTheProject: a state root given by --dir (or
// CREW_DIR) that the project does not find by itself is written into the
// hooks and the MCP server's arguments, quoted, so that the agent, whose
// environment has no CREW_DIR, reaches it; a root the project finds is
// not written.
func TestSetupPinsARootOutsideTheProject(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "state root")
	makeSetupRoot(t, root)
	project := t.TempDir()
	runSetup(t, project, "--dir", root, "claude", "--run", "r1", "--task", "t1")
	want := filepath.Join(root, ".crew")
	args := readJSON(t, filepath.Join(project, ".mcp.json"))["mcpServers"].(map[string]any)["crew"].(map[string]any)["args"]
	if got := mustJSON(t, args); got != mustJSON(t, []string{"mcp", "--run", "r1", "--task", "t1", "--dir", want}) {
		t.Fatalf("MCP server args %s, want the root pinned", got)
	}
	hook := readJSON(t, filepath.Join(project, ".claude", "settings.json"))["hooks"].(map[string]any)["SessionStart"].([]any)[0].(map[string]any)["hooks"].([]any)[0].(map[string]any)["command"].(string)
	cmd := exec.Command("/bin/sh", "-c", hook)
	cmd.Dir = project
	cmd.Env = slices.DeleteFunc(os.Environ(), func(v string) bool { return strings.HasPrefix(v, "CREW_") })
	cmd.Stdin = strings.NewReader(`{"hook_event_name":"SessionStart","source":"startup","session_id":"s1"}`)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "task t1") {
		t.Fatalf("the hook written (%s), run without CREW_DIR in the project: %v: %s", hook, err, out)
	}

	inside := filepath.Join(root, "project")
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	runSetup(t, inside, "--dir", root, "claude", "--run", "r1", "--task", "t1")
	if b, _ := os.ReadFile(filepath.Join(inside, ".mcp.json")); bytes.Contains(b, []byte("--dir")) {
		t.Fatalf("a root the project finds was pinned:\n%s", b)
	}
}

// TestSetupRefusesADollarInAPath: Claude Code expands ${VAR} and Gemini
// CLI $VAR too in the strings setup writes (the breaker's finding), so a
// root or crew path holding them is refused with exit 2 and nothing
// written; Codex, which expands neither, takes it.
func TestSetupRefusesADollarInAPath(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "state${HOME}")
	makeSetupRoot(t, root)
	for _, agent := range []string{"claude", "gemini"} {
		project := t.TempDir()
		var stdout, stderr bytes.Buffer
		code := Main([]string{"crew", "setup", "--project", project, "--crew-path", "crew", "--dir", root, agent, "--run", "r1", "--task", "t1"}, strings.NewReader(""), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "which the agent expands") {
			t.Fatalf("setup %s with a root holding $: exit %d: %s; want 2 and the reason", agent, code, stderr.String())
		}
		if ents, _ := os.ReadDir(project); len(ents) != 0 {
			t.Fatalf("setup %s refused, yet wrote %d files", agent, len(ents))
		}
	}
	runSetup(t, t.TempDir(), "--dir", root, "codex", "--run", "r1", "--task", "t1")
}
