// crew setup claude|codex|gemini: register crew mcp (and for Claude
// Code and Gemini CLI the crew hooks) in the project's agent
// configuration, merged into what is there.

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
)

func setupCommand() *cli.Command {
	return &cli.Command{
		Name:  "setup",
		Usage: "register crew with an agent in this project: claude (.mcp.json and .claude/settings.json hooks), codex (.codex/config.toml) or gemini (.gemini/settings.json: MCP server and hooks)",
		UsageText: "crew setup claude\ncrew setup claude --task t1 --run r1   # a worker's own checkout\n" +
			"crew setup codex --dry-run",
		ArgsUsage: "claude|codex|gemini",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "run", Usage: "pin the run `ID` in the configuration (default: CREW_RUN of the agent's environment)"},
			&cli.StringFlag{Name: "task", Usage: "pin the worker's task `ID` (default: CREW_TASK of the agent's environment)"},
			&cli.StringFlag{Name: "project", Usage: "the project `DIR` whose configuration to write", Value: "."},
			&cli.BoolFlag{Name: "dry-run", Usage: "show what would change, write nothing"},
		},
		Action: setup,
	}
}

// configFile is one file crew setup writes: its path and its content
// after the merge.
type configFile struct {
	path     string
	old, new []byte
}

func setup(c *cli.Context) error {
	e := newEnv(c)
	if c.Args().Len() != 1 {
		return fmt.Errorf("setup takes the agent: claude, codex or gemini: %w", crew.ErrInvalid)
	}
	pin := []string{}
	for _, name := range []string{"run", "task"} {
		if v := c.String(name); v != "" {
			if err := crew.ValidateID(name, v); err != nil {
				return err
			}
			pin = append(pin, "--"+name, v)
		}
	}
	dir := c.String("project")
	var files []configFile
	var err error
	switch agent := c.Args().First(); agent {
	case "claude":
		files, err = setupClaude(dir, pin)
	case "codex":
		files, err = setupCodex(dir, pin)
	case "gemini":
		files, err = setupGemini(dir, pin)
	default:
		return fmt.Errorf("setup %q: crew sets up claude, codex or gemini (any other MCP client: run crew mcp): %w", agent, crew.ErrInvalid)
	}
	if err != nil {
		return err
	}
	for _, f := range files {
		if bytes.Equal(f.old, f.new) {
			fmt.Fprintf(e.stdout, "unchanged %s\n", f.path)
			continue
		}
		verb := "updated"
		if f.old == nil {
			verb = "created"
		}
		if c.Bool("dry-run") {
			fmt.Fprintf(e.stdout, "would have %s %s:\n%s", verb, f.path, lineDiff(string(f.old), string(f.new)))
			continue
		}
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return err
		}
		if err := writeFileAtomic(f.path, f.new); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s %s\n", verb, f.path)
	}
	return nil
}

// readConfig returns a file's bytes, nil if it does not exist.
func readConfig(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// writeFileAtomic replaces path by data through a temporary file and a
// rename, keeping the mode of the file it replaces.
func writeFileAtomic(path string, data []byte) error {
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".crew-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// mergeJSON decodes path's JSON object (none: an empty one), lets edit
// change it, and returns the file before and after; unknown keys are
// kept (objects are written with sorted keys, two-space indented).
func mergeJSON(path string, edit func(map[string]any)) (configFile, error) {
	old, err := readConfig(path)
	if err != nil {
		return configFile{}, err
	}
	doc := map[string]any{}
	if len(bytes.TrimSpace(old)) > 0 {
		if err := json.Unmarshal(old, &doc); err != nil {
			return configFile{}, fmt.Errorf("%s is not a JSON object (%v); fix or move it, crew does not overwrite it: %w", path, err, crew.ErrInvalid)
		}
	}
	edit(doc)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return configFile{}, err
	}
	if old != nil && jsonEqual(old, b.Bytes()) {
		return configFile{path: path, old: old, new: old}, nil // same content: leave the user's formatting
	}
	return configFile{path: path, old: old, new: b.Bytes()}, nil
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

// object returns doc[key] as an object, making it if missing or not one.
func object(doc map[string]any, key string) map[string]any {
	if m, ok := doc[key].(map[string]any); ok {
		return m
	}
	m := map[string]any{}
	doc[key] = m
	return m
}

// setupClaude: crew mcp in .mcp.json (the project's MCP servers), and a
// crew hook per event in .claude/settings.json
// (https://code.claude.com/docs/en/hooks: hooks.<Event>[] of {matcher,
// hooks: [{type: "command", command}]}).
func setupClaude(dir string, pin []string) ([]configFile, error) {
	mcpFile, err := mergeJSON(filepath.Join(dir, ".mcp.json"), func(doc map[string]any) {
		object(doc, "mcpServers")["crew"] = map[string]any{"type": "stdio", "command": "crew", "args": toAny(append([]string{"mcp"}, pin...))}
	})
	if err != nil {
		return nil, err
	}
	settings, err := mergeJSON(filepath.Join(dir, ".claude", "settings.json"), func(doc map[string]any) {
		addHooks(doc, hookAgents[0], "*", pin)
	})
	if err != nil {
		return nil, err
	}
	return []configFile{mcpFile, settings}, nil
}

// setupGemini: crew mcp and a crew hook per event in
// .gemini/settings.json (https://geminicli.com/docs/tools/mcp-server:
// mcpServers.<name> of {command, args}; hooks as Claude Code's, a
// missing matcher matching every tool:
// https://geminicli.com/docs/hooks/reference).
func setupGemini(dir string, pin []string) ([]configFile, error) {
	settings, err := mergeJSON(filepath.Join(dir, ".gemini", "settings.json"), func(doc map[string]any) {
		object(doc, "mcpServers")["crew"] = map[string]any{"command": "crew", "args": toAny(append([]string{"mcp"}, pin...))}
		addHooks(doc, hookAgents[1], "", pin)
	})
	if err != nil {
		return nil, err
	}
	return []configFile{settings}, nil
}

// addHooks sets doc's hooks.<Event>[] entry running crew hook for each
// of a's events, the tool event with matcher toolMatcher (none when "").
// crew's own entries (an earlier setup, maybe with other pins) are
// replaced; everything else stays in its place.
func addHooks(doc map[string]any, a hookAgent, toolMatcher string, pin []string) {
	hooks := object(doc, "hooks")
	prefix := "crew hook " + a.name + " "
	for _, ev := range a.events {
		command := prefix + strings.Join(append([]string{ev.name}, pin...), " ")
		entry := map[string]any{"hooks": []any{map[string]any{"type": "command", "command": command}}}
		if ev.at == app.AtToolResult && toolMatcher != "" {
			entry["matcher"] = toolMatcher
		}
		groups, _ := hooks[ev.name].([]any)
		groups = slices.DeleteFunc(slices.Clone(groups), func(g any) bool { return isCrewHook(g, prefix) })
		hooks[ev.name] = append(groups, entry)
	}
}

// isCrewHook reports whether a hooks group is one crew setup wrote: all
// its commands start with prefix (crew hook AGENT).
func isCrewHook(group any, prefix string) bool {
	g, _ := group.(map[string]any)
	hs, _ := g["hooks"].([]any)
	if len(hs) == 0 {
		return false
	}
	for _, h := range hs {
		m, _ := h.(map[string]any)
		cmd, _ := m["command"].(string)
		if !strings.HasPrefix(cmd, prefix) {
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

// setupCodex: crew mcp as [mcp_servers.crew] in .codex/config.toml
// (https://developers.openai.com/codex/mcp). The table is replaced, or
// appended; every other line of the file stays as it was, comments too.
func setupCodex(dir string, pin []string) ([]configFile, error) {
	path := filepath.Join(dir, ".codex", "config.toml")
	old, err := readConfig(path)
	if err != nil {
		return nil, err
	}
	args := make([]string, 0, len(pin)+1)
	for _, a := range append([]string{"mcp"}, pin...) {
		q, _ := json.Marshal(a) // a TOML basic string is a JSON string for these
		args = append(args, string(q))
	}
	table := "[mcp_servers.crew]\ncommand = \"crew\"\nargs = [" + strings.Join(args, ", ") + "]\n"
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
	return []configFile{{path: path, old: old, new: []byte(content)}}, nil
}

// lineDiff is a line diff of a and b: lines only in a marked "-", only
// in b "+", common ones " " (longest common subsequence; config files
// are small).
func lineDiff(a, b string) string {
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
