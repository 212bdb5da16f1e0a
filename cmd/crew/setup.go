// crew setup claude|codex|gemini: register crew mcp (and for Claude
// Code and Gemini CLI the crew hooks) in the project's agent
// configuration, merged into what is there. The merging is package
// internal/agentconfig's; this file reads and writes the files and says
// what changed. Setup must not fail silently, as an agent does when a
// hook cannot run: every command it writes names the crew that ran it
// by its absolute path (or --crew-path), a pinned run or task must exist
// (exit 4), and once written, the SessionStart hook is run as the agent
// will run it, peeking, and its failure reported (exit 1).

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/internal/agentconfig"
	"github.com/crew-dev/crew/run"
)

func setupCommand() *cli.Command {
	return &cli.Command{
		Name:  "setup",
		Usage: "register crew with an agent in this project: claude (.mcp.json and .claude/settings.json hooks), codex (.codex/config.toml: MCP server; .codex/hooks.json) or gemini (.gemini/settings.json: MCP server and hooks)",
		UsageText: "crew setup claude\ncrew setup claude --task t1 --run r1   # a worker's own checkout\n" +
			"crew setup claude --as leader --run r1   # the leader's session\n" +
			"crew setup codex --dry-run\n" +
			"crew setup claude --http                        # hooks and MCP through crew serve at " + defaultServeURL + "\n" +
			"crew setup claude --http http://10.0.0.5:7777   # CREW_TOKEN in the agent's environment: crew serve's token",
		ArgsUsage: "claude|codex|gemini [URL]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "run", Usage: "pin the run `ID` in the configuration (default: CREW_RUN of the agent's environment)"},
			&cli.StringFlag{Name: "task", Usage: "pin the worker's task `ID` (default: CREW_TASK of the agent's environment)"},
			&cli.StringFlag{Name: "as", Usage: "pin the acting agent `NAME`: the run's leader's name sets up a leader's session (its hooks show it the workers' questions, reports and failures)"},
			&cli.StringFlag{Name: "project", Usage: "the project `DIR` whose configuration to write", Value: "."},
			&cli.BoolFlag{Name: "dry-run", Usage: "show what would change, write nothing"},
			&cli.BoolFlag{Name: "http", Usage: "reach crew through crew serve at URL (default " + defaultServeURL + "): Claude Code's hooks of type http and its MCP server, Codex's MCP server; the agent's environment gives the token as " + tokenEnv + " (never written to a file); the wait hook stays a command"},
			&cli.StringFlag{Name: "crew-path", Usage: "the crew `COMMAND` the agent runs (default: the absolute path of this crew; a bare name such as crew is looked up on the agent's PATH)"},
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
	url := ""
	switch {
	case c.Bool("http") && c.Args().Len() == 2:
		url = strings.TrimSuffix(c.Args().Get(1), "/")
		if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
			return fmt.Errorf("setup --http %q: want crew serve's URL, such as %s: %w", url, defaultServeURL, crew.ErrInvalid)
		}
	case c.Bool("http") && c.Args().Len() == 1:
		url = defaultServeURL
	case c.Args().Len() != 1:
		return fmt.Errorf("setup takes the agent: claude, codex or gemini (and with --http crew serve's URL): %w", crew.ErrInvalid)
	}
	pin := []string{}
	for _, name := range []string{"run", "task", "as"} {
		if v := c.String(name); v != "" {
			if err := crew.ValidateID(map[string]string{"run": "run", "task": "task", "as": "agent"}[name], v); err != nil {
				return err
			}
			pin = append(pin, "--"+name, v)
		}
	}
	dir := c.String("project")
	if !c.IsSet("dir") {
		// The state root the agent's hooks find: the nearest above the
		// project.
		if err := c.Set("dir", dir); err != nil {
			return err
		}
	} else if pinned, err := pinRoot(e, dir); err != nil {
		return err
	} else {
		pin = append(pin, pinned...)
	}
	agent := c.Args().First()
	if agent != "claude" && agent != "codex" && agent != "gemini" {
		return fmt.Errorf("setup %q: crew sets up claude, codex or gemini (any other MCP client: run crew mcp): %w", agent, crew.ErrInvalid)
	}
	if url != "" && agent == "gemini" {
		return fmt.Errorf("setup gemini --http: Gemini CLI's hooks are commands only; set it up without --http: %w", crew.ErrInvalid)
	}
	command, err := crewPath(c.String("crew-path"))
	if err != nil {
		return err
	}
	if err := noExpansion(agent, append([]string{command}, pin...)); err != nil {
		return err
	}
	if strings.Contains(command, string(filepath.Separator)+"go-build") { // go run's: $GOTMPDIR/go-buildN/b001/exe/crew
		fmt.Fprintf(e.stderr, "crew: warning: this crew is a temporary build (%s), which may be gone when the agent runs it: install crew (go install, make build) and set up again, or give --crew-path\n", command)
	}
	// The pinned run and task must exist: an agent set up for a task
	// that is not there would get nothing from its hooks, silently.
	if c.String("run") != "" || c.String("task") != "" || c.String("as") != "" {
		if _, err := e.app().Deliver(c.Context, app.Deliver{Moment: app.AtSessionStart, Peek: true}); err != nil {
			return err
		}
	}
	var files []configFile
	switch agent {
	case "claude":
		files, err = setupClaude(dir, command, url, pin)
	case "codex":
		files, err = setupCodex(dir, command, url, pin)
	case "gemini":
		files, err = setupGemini(dir, command, pin)
	}
	if err != nil {
		return err
	}
	// The hook command is checked before anything is written: it reads
	// no configuration file, so it runs now as it will from the agent.
	checked := ""
	if i := slices.IndexFunc(hookAgents, func(a hookAgent) bool { return a.Name == agent }); i >= 0 {
		if err := checkHook(c, dir, hookAgents[i], command, pin); err != nil {
			return err
		}
		checked = command
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
			fmt.Fprintf(e.stdout, "would have %s %s:\n%s", verb, f.path, agentconfig.LineDiff(string(f.old), string(f.new)))
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
	if checked != "" {
		fmt.Fprintf(e.stdout, "checked: the SessionStart hook runs (%s)\n", checked)
	}
	if !c.Bool("dry-run") {
		fmt.Fprint(e.stdout, nextSteps(agent, pin))
		if url != "" {
			fmt.Fprintf(e.stdout, "- run crew serve at %s with %s set (openssl rand -hex 32), and give the agent the same %s: a hook or MCP call while crew serve is down delivers nothing and loses nothing (the next one that reaches it delivers); without crew serve, set up again without --http for command hooks\n", url, tokenEnv, tokenEnv)
		}
	} else if agent == "codex" {
		fmt.Fprint(e.stdout, "then:\n"+codexTrust)
	}
	return nil
}

// pinRoot returns --dir ROOT when the state root given (--dir, CREW_DIR)
// is not the one the agent finds from the project by itself (the nearest
// .crew above it): the agent's hooks and MCP server are started without
// crew's environment, unless crew spawn starts the agent. Nothing for a
// NATS root (--store), which has no directory.
func pinRoot(e *env, project string) ([]string, error) {
	root, err := e.root()
	if err != nil {
		return nil, err
	}
	if root.Dir() == "" {
		return nil, nil
	}
	found, err := run.Find(project, e.perm())
	if err == nil {
		defer found.Close()
		if found.Dir() == root.Dir() {
			return nil, nil
		}
	}
	return []string{"--dir", root.Dir()}, nil
}

// noExpansion refuses a word setup would write for agent (crew's path, a
// pinned root) that the agent would expand as a variable, and so run
// another path than the one checked here: Claude Code expands ${VAR} in
// .mcp.json's command and args (its MCP docs, "Environment variable
// expansion in .mcp.json"), Gemini CLI $VAR and ${VAR} in every string of
// its settings.json, hooks included. Codex expands neither.
func noExpansion(agent string, words []string) error {
	var sign string
	switch agent {
	case "claude":
		sign = "${"
	case "gemini":
		sign = "$"
	default:
		return nil
	}
	for _, w := range words {
		if strings.Contains(w, sign) {
			return fmt.Errorf("setup %s: %q holds %s, which the agent expands as a variable; use a path without it (a symbolic link to it will do): %w", agent, w, sign, crew.ErrInvalid)
		}
	}
	return nil
}

// crewPath is the crew command the agent is to run: path as given
// (--crew-path), else the absolute path of this crew (selfPath).
func crewPath(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	p, err := selfPath()
	if err != nil {
		return "", fmt.Errorf("cannot tell this crew's path (%v); give --crew-path: %w", err, crew.ErrInvalid)
	}
	return p, nil
}

// checkHook runs the SessionStart hook setup writes for agent a, with
// --peek (nothing recorded), as the agent will: through the shell, in
// the project directory, with a SessionStart input. A hook that cannot
// run, fails or answers with no JSON is an error (exit 1) naming the
// command and what it printed.
func checkHook(c *cli.Context, dir string, a hookAgent, command string, pin []string) error {
	line := agentconfig.CommandLine(command, append([]string{"hook", a.Name, "SessionStart"}, pin...)...) + " --peek"
	cmd := exec.CommandContext(c.Context, "/bin/sh", "-c", line)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(`{"hook_event_name":"SessionStart","source":"startup","session_id":"crew-setup-check"}`)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	switch {
	case err != nil:
	case stdout.Len() > 0 && !json.Valid(stdout.Bytes()):
		err = errors.New("its answer is not JSON")
	case stdout.Len() == 0 && (slices.Contains(pin, "--task") || slices.Contains(pin, "--as")):
		err = errors.New("it gave no brief for the pinned identity (an agent with --as and no task gets one only as the run's leader)")
	}
	if err != nil {
		return fmt.Errorf("the SessionStart hook written does not run: %s: %v: %s (fix it, or give --crew-path the crew the agent can run)",
			line, err, strings.TrimSpace(stderr.String()+stdout.String()))
	}
	return nil
}

// nextSteps is what a user must still do after setup for agent, with
// the pins given.
func nextSteps(agent string, pin []string) string {
	var b strings.Builder
	b.WriteString("next:\n")
	identity := "CREW_RUN and CREW_TASK (a worker) or CREW_AGENT set to the run's leader (the leader) in the agent's environment; crew spawn sets them for a worker"
	if len(pin) > 0 {
		identity = "the identity is pinned (" + strings.Join(pin, " ") + ")"
	}
	switch agent {
	case "claude":
		fmt.Fprintf(&b, "- start Claude Code in this project (claude, or claude -p --input-format stream-json with standard input kept open to be woken when idle); %s\n", identity)
		b.WriteString("- a session started before this setup reads the hooks only once restarted; a finished claude -p is never woken\n")
		b.WriteString("- a worker under crew spawn: crew spawn TASK --tmux SESSION -- claude (interactive), or claude -p --input-format stream-json with standard input kept open, so that the wait hook can wake it\n")
		b.WriteString("- Claude Code applies the project's permission rule for crew's tools (mcp__crew__*) only in a trusted project: accept the trust dialog of an interactive claude once, or for a headless worker set projects[\"DIR\"].hasTrustDialogAccepted in ~/.claude.json; else each crew tool call asks for permission\n")
		b.WriteString("- a claude -p turn ends 30 s late while the wait hook waits in the background (Claude Code then ends it): that is the wait hook, not a stuck worker\n")
	case "gemini":
		fmt.Fprintf(&b, "- start Gemini CLI in this project; %s\n", identity)
		b.WriteString("- Gemini CLI reads a project's settings only in a trusted folder: trust it, or run a headless worker with GEMINI_CLI_TRUST_WORKSPACE=true\n")
	case "codex":
		fmt.Fprintf(&b, "- start Codex in this project; %s\n", identity)
		b.WriteString(codexTrust)
	}
	return b.String()
}

// codexTrust is what a Codex user must trust before Codex reads what
// setup wrote: it ignores a project's .codex/config.toml and its hooks,
// saying nothing, until the project and the hooks are trusted.
const codexTrust = "- Codex ignores this project's .codex/config.toml and .codex/hooks.json, silently, until both are trusted: " +
	"interactively, accept the project and review the hooks (/hooks) when Codex asks; " +
	"a headless worker: codex exec --trust (the project) --dangerously-bypass-hook-trust (the hooks), or the trust entries ([projects.\"DIR\"] trust_level = \"trusted\") in ~/.codex/config.toml\n" +
	"- a worker under crew spawn: crew spawn TASK -- codex exec --trust --dangerously-bypass-hook-trust --sandbox workspace-write \"PROMPT\" (--add-dir DIR for a crew state directory outside the project; crew spawn sets CREW_RUN and CREW_TASK, which env_vars passes on to crew mcp)\n"

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

// mergeFile reads the file rel (slash-separated) of the project
// directory dir and returns it before and after merge.
func mergeFile(dir, rel string, merge func(path string, old []byte) ([]byte, error)) (configFile, error) {
	path := filepath.Join(dir, filepath.FromSlash(rel))
	old, err := readConfig(path)
	if err != nil {
		return configFile{}, err
	}
	b, err := merge(path, old)
	if err != nil {
		return configFile{}, err
	}
	return configFile{path: path, old: old, new: b}, nil
}

// defaultServeURL is crew serve's address when --addr is not given:
// crew setup --http's default.
const defaultServeURL = "http://127.0.0.1:7777"

// setupClaude: crew mcp in .mcp.json (the project's MCP servers), and a
// crew hook per event, the wait hook and the permission for crew's MCP
// tools in .claude/settings.json; command is the crew the agent runs.
// With url (crew serve's), the MCP server and the hooks but the wait
// hook are crew serve's over HTTP.
func setupClaude(dir, command, url string, pin []string) ([]configFile, error) {
	mcpFile, err := mergeFile(dir, agentconfig.ClaudeMCPFile, func(path string, old []byte) ([]byte, error) {
		if url != "" {
			return agentconfig.ClaudeMCPHTTP(path, old, url, pin)
		}
		return agentconfig.ClaudeMCP(path, old, command, pin)
	})
	if err != nil {
		return nil, err
	}
	hooks := setupHooks(hookAgents[0], command)
	hooks.URL = url
	settings, err := mergeFile(dir, agentconfig.ClaudeSettingsFile, func(path string, old []byte) ([]byte, error) {
		return agentconfig.ClaudeSettings(path, old, hooks, pin)
	})
	if err != nil {
		return nil, err
	}
	return []configFile{mcpFile, settings}, nil
}

// setupGemini: crew mcp and a crew hook per event in
// .gemini/settings.json.
func setupGemini(dir, command string, pin []string) ([]configFile, error) {
	settings, err := mergeFile(dir, agentconfig.GeminiSettingsFile, func(path string, old []byte) ([]byte, error) {
		return agentconfig.GeminiSettings(path, old, setupHooks(hookAgents[1], command), pin)
	})
	if err != nil {
		return nil, err
	}
	return []configFile{settings}, nil
}

// setupCodex: crew mcp as [mcp_servers.crew] in .codex/config.toml
// (with the env_vars it needs and a day's tool timeout; with url: crew
// serve's MCP endpoint), and a crew hook per event in .codex/hooks.json
// beside it (Codex's hooks are commands).
func setupCodex(dir, command, url string, pin []string) ([]configFile, error) {
	f, err := mergeFile(dir, agentconfig.CodexConfigFile, func(_ string, old []byte) ([]byte, error) {
		if url != "" {
			return agentconfig.CodexConfigHTTP(old, url, pin), nil
		}
		return agentconfig.CodexConfig(old, command, pin), nil
	})
	if err != nil {
		return nil, err
	}
	hooks, err := mergeFile(dir, agentconfig.CodexHooksFile, func(path string, old []byte) ([]byte, error) {
		return agentconfig.CodexHooks(path, old, setupHooks(codexAgent, command), pin)
	})
	if err != nil {
		return nil, err
	}
	return []configFile{f, hooks}, nil
}
