// Package agentconfig merges crew into the configuration files of the
// agents crew sets up (crew setup claude|codex|gemini): crew mcp as an
// MCP server, and, for Claude Code and Gemini CLI, a crew hook command
// per hook event (for Claude Code also the wait hook that wakes an idle
// session, and a permission rule for crew's MCP tools). Its functions
// are pure, over the files' content: the command reads the files, calls
// them, shows or writes what changed.
//
// Every command written names the crew binary given (Hooks.Command, the
// command argument): setup passes the absolute path of the crew that
// ran it, so an agent whose PATH lacks crew still runs it.
//
// A merge keeps everything that is not crew's: other keys, servers and
// hooks stay where they are, and crew's own entries of an earlier setup
// (perhaps with other pins) are replaced, so a second setup with the
// same pins changes nothing. JSON files are written with sorted keys,
// two-space indented, unless their content does not change, when they
// are left as they were; in Codex's TOML every line but crew's table is
// kept, comments too.
package agentconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/crew-dev/crew"
)

// The files each agent reads, relative to the project directory
// (slash-separated).
const (
	// ClaudeMCPFile holds Claude Code's project MCP servers.
	ClaudeMCPFile = ".mcp.json"
	// ClaudeSettingsFile holds Claude Code's project hooks
	// (https://code.claude.com/docs/en/hooks).
	ClaudeSettingsFile = ".claude/settings.json"
	// GeminiSettingsFile holds Gemini CLI's MCP servers and hooks
	// (https://geminicli.com/docs/tools/mcp-server,
	// https://geminicli.com/docs/hooks/reference).
	GeminiSettingsFile = ".gemini/settings.json"
	// CodexConfigFile holds Codex's MCP servers
	// (https://developers.openai.com/codex/mcp).
	CodexConfigFile = ".codex/config.toml"
	// CodexHooksFile holds Codex's project hooks, beside its config
	// (https://developers.openai.com/codex/hooks): Claude Code's shape.
	CodexHooksFile = ".codex/hooks.json"
)

// CodexEnvVars are the variables of the agent's environment Codex
// passes to crew mcp (env_vars: Codex gives an MCP server only an
// allow-list of its environment, so under crew spawn the server would
// not know its run or task).
var CodexEnvVars = []string{"CREW_DIR", "CREW_RUN", "CREW_TASK", "CREW_AGENT", "CREW_STORE", "CREW_NATS_CREDS", "CREW_NATS_TLS_CA", "CREW_NATS_REPLICAS"}

// CodexToolTimeout is crew mcp's tool_timeout_sec, in seconds: a day,
// so that a crew_ask waiting for the leader is not cut off by Codex's
// tool timeout (progress notifications do not extend it).
const CodexToolTimeout = 86400

// Hooks are the crew hook commands of one agent: for each event, in
// order, "CREW hook AGENT EVENT" and the pinned arguments.
type Hooks struct {
	// Command is the crew binary the hooks run: an absolute path, or a
	// name looked up on the agent's PATH ("" is crew).
	Command    string
	Agent      string   // the agent's name on crew hook's command line: claude, gemini
	Events     []string // the agent's hook events crew answers, in order
	ToolEvents []string // those of Events that follow a tool call (PostToolUse, PostToolUseFailure)
	// WaitEvents, for Claude Code, are the events that start "CREW hook
	// AGENT wait" as an asyncRewake hook: a background command whose
	// exit 2 wakes the session, even an idle one, with its standard
	// error (https://code.claude.com/docs/en/hooks). crew hook wait lets
	// one run per session, so arming it at every one of them is safe.
	WaitEvents []string
	// WaitTimeout is how long, in seconds, the agent lets a wait hook
	// run before it kills it (the next WaitEvent arms another).
	WaitTimeout int
	// URL, when not "", is the crew serve the hooks are posted to
	// (http://HOST:PORT): each of Events is then a hook of type "http"
	// (Claude Code's only) at URL/hooks/AGENT/EVENT, not a command; the
	// wait hook stays a command (an asyncRewake hook is one).
	URL string
	// FailOpen, for Gemini CLI, ends each command with FailOpenSuffix:
	// Gemini reads a hook's exit 1 as a warning it shows the user and
	// goes on from, but any other failure that printed something (127
	// for a crew that is not there, with the shell's "not found") as
	// "deny", which blocks the turn with no word to the user.
	FailOpen bool
}

// FailOpenSuffix ends a Gemini CLI hook command (Hooks.FailOpen): every
// failure of crew hook becomes exit 1, a warning.
const FailOpenSuffix = " || exit 1"

// The environment variables an HTTP hook or an MCP client over HTTP
// takes from the agent's environment (Claude Code's allowedEnvVars,
// never their values in a file): crew serve's token, and the identity
// crew hook reads from CREW_RUN, CREW_TASK and CREW_AGENT.
const TokenEnv = "CREW_TOKEN"

// The headers that carry the identity of an HTTP hook or an MCP session
// of crew serve (web): crew setup --http writes them with the agent's
// CREW_RUN, CREW_TASK and CREW_AGENT (listed in the hook's
// allowedEnvVars, so Claude Code fills them in). An empty or missing
// header is app.App's default, as an unset variable is for crew hook.
const (
	HeaderRun   = "X-Crew-Run"
	HeaderTask  = "X-Crew-Task"
	HeaderAgent = "X-Crew-Agent"
)

// identityHeaders are the headers of crew serve's HTTP hooks and MCP
// endpoint that carry the identity, each with its
// pin flag and its variable.
var identityHeaders = []struct{ header, flag, env string }{
	{HeaderRun, "--run", "CREW_RUN"}, {HeaderTask, "--task", "CREW_TASK"}, {HeaderAgent, "--as", "CREW_AGENT"},
}

// pinned returns the value pinned for flag, "" for none.
func pinned(pin []string, flag string) string {
	for i := 0; i+1 < len(pin); i += 2 {
		if pin[i] == flag {
			return pin[i+1]
		}
	}
	return ""
}

// httpHook is Claude Code's hook of type "http" for event: the
// token as a bearer token from TokenEnv, the identity pinned or from
// the agent's environment, the variables used listed in
// allowedEnvVars (https://code.claude.com/docs/en/hooks).
func (h Hooks) httpHook(event string, pin []string) map[string]any {
	headers := map[string]any{"Authorization": "Bearer $" + TokenEnv}
	allowed := []string{TokenEnv}
	for _, id := range identityHeaders {
		if v := pinned(pin, id.flag); v != "" {
			headers[id.header] = v
			continue
		}
		headers[id.header] = "$" + id.env
		allowed = append(allowed, id.env)
	}
	return map[string]any{"type": "http", "url": strings.TrimSuffix(h.URL, "/") + "/hooks/" + h.Agent + "/" + event,
		"headers": headers, "allowedEnvVars": toAny(allowed), "timeout": HTTPHookTimeout}
}

// HTTPHookTimeout is the timeout, in seconds, of crew's HTTP hooks: an
// answer takes a millisecond; a server that hangs must not hold the
// agent's loop for Claude Code's default of ten minutes.
const HTTPHookTimeout = 10

// ClaudeMCPPermission is the permission rule of Claude Code's settings
// (permissions.allow) that lets the model call every tool of the MCP
// server named crew without asking (https://code.claude.com/docs/en/permissions:
// mcp__SERVER__* matches all of a server's tools).
const ClaudeMCPPermission = "mcp__crew__*"

// ShellQuote quotes s for a POSIX shell, which runs the agents' hook
// commands: as it is when it has no special character.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// CommandLine is a shell's command line that runs command with args,
// each word quoted where a shell would split or expand it (a pinned
// --dir may hold a space).
func CommandLine(command string, args ...string) string {
	words := []string{ShellQuote(command)}
	for _, a := range args {
		words = append(words, ShellQuote(a))
	}
	return strings.Join(words, " ")
}

// command returns the hook command line for event (or "wait"), pinned.
func (h Hooks) command(event string, pin []string) string {
	c := CommandLine(crewCommand(h.Command), append([]string{"hook", h.Agent, event}, pin...)...)
	if h.FailOpen {
		c += FailOpenSuffix
	}
	return c
}

func crewCommand(c string) string {
	if c == "" {
		return "crew"
	}
	return c
}

// MergeJSON decodes old, the content of the JSON file called name in
// messages (nil or blank: none yet, an empty object), lets edit change
// the object, and returns the new content (sorted keys, two-space
// indented), or old itself when its content is the same (the user's
// formatting stays). Unknown keys are kept. Content that is no JSON
// object is crew.ErrInvalid: crew does not overwrite it.
func MergeJSON(name string, old []byte, edit func(map[string]any)) ([]byte, error) {
	doc := map[string]any{}
	if len(bytes.TrimSpace(old)) > 0 {
		if err := json.Unmarshal(old, &doc); err != nil {
			return nil, fmt.Errorf("%s is not a JSON object (%v); fix or move it, crew does not overwrite it: %w", name, err, crew.ErrInvalid)
		}
	}
	edit(doc)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if old != nil && jsonEqual(old, b.Bytes()) {
		return old, nil
	}
	return b.Bytes(), nil
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// ClaudeMCP merges crew mcp, run as command (the crew binary; "" is
// crew) with the pinned arguments (--run R --task T), into Claude Code's
// .mcp.json: mcpServers.crew of {type: stdio, command, args}. name is
// the file's name in messages (MergeJSON).
func ClaudeMCP(name string, old []byte, command string, pin []string) ([]byte, error) {
	return MergeJSON(name, old, func(doc map[string]any) {
		object(doc, "mcpServers")["crew"] = map[string]any{"type": "stdio", "command": crewCommand(command), "args": toAny(append([]string{"mcp"}, pin...))}
	})
}

// ClaudeMCPHTTP merges crew serve's MCP endpoint at url (http://HOST:PORT)
// into Claude Code's .mcp.json: mcpServers.crew of {type: http, url:
// URL/mcp, headers}, the token and the identity not pinned taken from
// the agent's environment when Claude Code starts the session (${VAR}
// expansion; ${VAR:-} for the identity, which may be unset).
func ClaudeMCPHTTP(name string, old []byte, url string, pin []string) ([]byte, error) {
	headers := map[string]any{"Authorization": "Bearer ${" + TokenEnv + "}"}
	for _, id := range identityHeaders {
		if v := pinned(pin, id.flag); v != "" {
			headers[id.header] = v
		} else {
			headers[id.header] = "${" + id.env + ":-}"
		}
	}
	return MergeJSON(name, old, func(doc map[string]any) {
		object(doc, "mcpServers")["crew"] = map[string]any{"type": "http", "url": strings.TrimSuffix(url, "/") + "/mcp", "headers": headers}
	})
}

// ClaudeSettings merges crew's hooks h, with the pinned arguments, into
// Claude Code's .claude/settings.json: hooks.<Event>[] of {matcher,
// hooks: [{type: "command", command}]}, the tool events' matching every
// tool ("*"), the wait hook's with asyncRewake and its timeout; the
// permission rule ClaudeMCPPermission in permissions.allow, and crew in
// enabledMcpjsonServers (the project's .mcp.json server approved, so
// Claude Code does not ask whether to start it).
func ClaudeSettings(name string, old []byte, h Hooks, pin []string) ([]byte, error) {
	return MergeJSON(name, old, func(doc map[string]any) {
		addHooks(doc, h, "*", pin)
		appendOnce(object(doc, "permissions"), "allow", ClaudeMCPPermission)
		appendOnce(doc, "enabledMcpjsonServers", "crew")
	})
}

// appendOnce appends s to the string list doc[key] unless it is in it.
func appendOnce(doc map[string]any, key, s string) {
	list, _ := doc[key].([]any)
	if slices.Contains(list, any(s)) {
		return
	}
	doc[key] = append(list, s)
}

// GeminiSettings merges crew mcp and crew's hooks h, with the pinned
// arguments, into Gemini CLI's .gemini/settings.json:
// mcpServers.crew of {command, args, trust: true} (trust: its tool
// calls are not confirmed one by one,
// https://geminicli.com/docs/tools/mcp-server), and hooks as Claude
// Code's, the tool event's without a matcher (which matches every tool).
func GeminiSettings(name string, old []byte, h Hooks, pin []string) ([]byte, error) {
	return MergeJSON(name, old, func(doc map[string]any) {
		object(doc, "mcpServers")["crew"] = map[string]any{"command": crewCommand(h.Command), "args": toAny(append([]string{"mcp"}, pin...)), "trust": true}
		addHooks(doc, h, "", pin)
	})
}

// CodexHooks merges crew's hooks h, with the pinned arguments, into
// Codex's .codex/hooks.json: Claude Code's shape, the tool event's
// without a matcher (Codex's matcher is a regular expression; none
// matches every tool, MCP tools too).
func CodexHooks(name string, old []byte, h Hooks, pin []string) ([]byte, error) {
	return MergeJSON(name, old, func(doc map[string]any) { addHooks(doc, h, "", pin) })
}

// object returns doc[key] as an object, making it if missing or not one.
func object(doc map[string]any, key string) map[string]any {
	if m, ok := doc[key].(map[string]any); ok {
		return m
	}
	m := map[string]any{}
	doc[key] = m
	return m
}

// addHooks sets doc's hooks.<Event>[] entries running crew hook for
// each of h's events, the tool events with matcher toolMatcher (none
// when ""), and the wait hook for each of h.WaitEvents. crew's own
// entries (an earlier setup, maybe with other pins or another crew
// binary) are replaced; everything else stays in its place.
func addHooks(doc map[string]any, h Hooks, toolMatcher string, pin []string) {
	hooks := object(doc, "hooks")
	var order []string
	entries := map[string][]any{}
	add := func(ev string, hook map[string]any) {
		if _, ok := entries[ev]; !ok {
			order = append(order, ev)
		}
		entry := map[string]any{"hooks": []any{hook}}
		if slices.Contains(h.ToolEvents, ev) && toolMatcher != "" {
			entry["matcher"] = toolMatcher
		}
		entries[ev] = append(entries[ev], entry)
	}
	for _, ev := range h.Events {
		if h.URL != "" {
			add(ev, h.httpHook(ev, pin))
			continue
		}
		add(ev, map[string]any{"type": "command", "command": h.command(ev, pin)})
	}
	for _, ev := range h.WaitEvents {
		// async too, which asyncRewake implies: a Claude Code that ran
		// a SessionStart asyncRewake hook in the foreground (reported for
		// 2.1.246, anthropics/claude-code#89960) would not start until a
		// message came; with async it runs the hook in the background.
		add(ev, map[string]any{"type": "command", "command": h.command("wait", pin), "async": true, "asyncRewake": true, "timeout": h.WaitTimeout})
	}
	for _, ev := range order {
		groups, _ := hooks[ev].([]any)
		groups = slices.DeleteFunc(slices.Clone(groups), func(g any) bool { return isCrewHook(g, h) })
		hooks[ev] = append(groups, entries[ev]...)
	}
}

// isCrewHook reports whether a hooks group is one crew setup wrote: all
// its commands run crew hook AGENT (IsCrewHookCommand), or its HTTP
// hooks post to crew serve's /hooks/AGENT/.
func isCrewHook(group any, h Hooks) bool {
	g, _ := group.(map[string]any)
	hs, _ := g["hooks"].([]any)
	if len(hs) == 0 {
		return false
	}
	for _, hook := range hs {
		m, _ := hook.(map[string]any)
		cmd, _ := m["command"].(string)
		url, _ := m["url"].(string)
		if !IsCrewHookCommand(cmd, h.Agent) && !(m["type"] == "http" && strings.Contains(url, "/hooks/"+h.Agent+"/")) {
			return false
		}
	}
	return true
}

// IsCrewHookCommand reports whether cmd is a crew hook command of agent:
// "CREW hook AGENT EVENT" and nothing but pins (--run, --task, --as and
// their values) after it, and maybe FailOpenSuffix, whatever the crew
// binary CREW (an earlier setup may have written another).
func IsCrewHookCommand(cmd, agent string) bool {
	i := strings.Index(cmd, " hook "+agent+" ")
	if i < 0 {
		return false
	}
	words := strings.Fields(strings.TrimSuffix(cmd[i+len(" hook "+agent+" "):], FailOpenSuffix))
	if len(words) == 0 || len(words)%2 != 1 {
		return false
	}
	for j := 1; j < len(words); j += 2 {
		if words[j] != "--run" && words[j] != "--task" && words[j] != "--as" {
			return false
		}
	}
	return true
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// CodexConfig merges crew mcp, run as command (the crew binary; "" is
// crew) with the pinned arguments, into Codex's .codex/config.toml (old:
// its content, nil for none) as the table [mcp_servers.crew]: the table
// (and its sub-tables) is replaced, or appended after a blank line;
// every other line stays as it was, comments too. The table passes
// CodexEnvVars to the server and gives its tools CodexToolTimeout.
func CodexConfig(old []byte, command string, pin []string) []byte {
	args := make([]string, 0, len(pin)+1)
	for _, a := range append([]string{"mcp"}, pin...) {
		args = append(args, tomlString(a))
	}
	var env []string
	for _, v := range CodexEnvVars {
		env = append(env, tomlString(v))
	}
	return codexTable(old, "[mcp_servers.crew]\ncommand = "+tomlString(crewCommand(command))+"\nargs = ["+strings.Join(args, ", ")+"]\n"+
		"env_vars = ["+strings.Join(env, ", ")+"]\n"+fmt.Sprintf("tool_timeout_sec = %d\n", CodexToolTimeout))
}

// tomlString quotes s as a TOML basic string (a JSON string is one for
// the strings crew writes).
func tomlString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// CodexConfigHTTP is CodexConfig for crew serve's MCP endpoint at url
// (http://HOST:PORT): [mcp_servers.crew] with url URL/mcp, the token
// from the variable TokenEnv (bearer_token_env_var), the identity
// pinned (http_headers) or from CREW_RUN, CREW_TASK and CREW_AGENT
// (env_http_headers; https://developers.openai.com/codex/mcp).
func CodexConfigHTTP(old []byte, url string, pin []string) []byte {
	var lit, env []string
	for _, id := range identityHeaders {
		if v := pinned(pin, id.flag); v != "" {
			lit = append(lit, tomlString(id.header)+" = "+tomlString(v))
		} else {
			env = append(env, tomlString(id.header)+" = "+tomlString(id.env))
		}
	}
	table := "[mcp_servers.crew]\nurl = " + tomlString(strings.TrimSuffix(url, "/")+"/mcp") + "\nbearer_token_env_var = " + tomlString(TokenEnv) + "\n"
	if len(lit) > 0 {
		table += "http_headers = { " + strings.Join(lit, ", ") + " }\n"
	}
	if len(env) > 0 {
		table += "env_http_headers = { " + strings.Join(env, ", ") + " }\n"
	}
	table += fmt.Sprintf("tool_timeout_sec = %d\n", CodexToolTimeout)
	return codexTable(old, table)
}

// codexTable replaces crew's table of Codex's config.toml old by table.
func codexTable(old []byte, table string) []byte {
	var out []string
	lines := strings.SplitAfter(string(old), "\n")
	replaced, skip := false, false
	for _, l := range lines {
		header := strings.TrimSpace(l)
		if strings.HasPrefix(header, "[") {
			name := strings.Trim(strings.SplitN(header, "#", 2)[0], "[] \t")
			skip = name == "mcp_servers.crew" || strings.HasPrefix(name, "mcp_servers.crew.")
			if name == "mcp_servers.crew" && !replaced {
				out = append(out, table)
				replaced = true
			}
		}
		if !skip {
			out = append(out, l)
		}
	}
	content := strings.Join(out, "")
	if !replaced {
		if content != "" && !strings.HasSuffix(content, "\n") {
			content += "\n"
		}
		if content != "" {
			content += "\n"
		}
		content += table
	} else if !strings.HasSuffix(content, "\n") {
		content += "\n"
	}
	return []byte(content)
}

// LineDiff is a line diff of a and b: lines only in a marked "- ", only
// in b "+ ", common ones "  " (longest common subsequence; configuration
// files are small).
func LineDiff(a, b string) string {
	x, y := splitLines(a), splitLines(b)
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			out.WriteString("  " + x[i] + "\n")
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			out.WriteString("+ " + y[j] + "\n")
			j++
		default:
			out.WriteString("- " + x[i] + "\n")
			i++
		}
	}
	return out.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
