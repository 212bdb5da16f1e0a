// crew setup claude|codex|gemini: register crew mcp (and for Claude
// Code and Gemini CLI the crew hooks) in the project's agent
// configuration, merged into what is there. The merging is package
// internal/agentconfig's; this file reads and writes the files and says
// what changed.

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/agentconfig"
)

func setupCommand() *cli.Command {
	return &cli.Command{
		Name:  "setup",
		Usage: "register crew with an agent in this project: claude (.mcp.json and .claude/settings.json hooks), codex (.codex/config.toml) or gemini (.gemini/settings.json: MCP server and hooks)",
		UsageText: "crew setup claude\ncrew setup claude --task t1 --run r1   # a worker's own checkout\n" +
			"crew setup claude --as leader --run r1   # the leader's session\n" +
			"crew setup codex --dry-run",
		ArgsUsage: "claude|codex|gemini",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "run", Usage: "pin the run `ID` in the configuration (default: CREW_RUN of the agent's environment)"},
			&cli.StringFlag{Name: "task", Usage: "pin the worker's task `ID` (default: CREW_TASK of the agent's environment)"},
			&cli.StringFlag{Name: "as", Usage: "pin the acting agent `NAME`: the run's leader's name sets up a leader's session (its hooks show it the workers' questions, reports and failures)"},
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
	for _, name := range []string{"run", "task", "as"} {
		if v := c.String(name); v != "" {
			if err := crew.ValidateID(map[string]string{"run": "run", "task": "task", "as": "agent"}[name], v); err != nil {
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

// setupClaude: crew mcp in .mcp.json (the project's MCP servers), and a
// crew hook per event in .claude/settings.json.
func setupClaude(dir string, pin []string) ([]configFile, error) {
	mcpFile, err := mergeFile(dir, agentconfig.ClaudeMCPFile, func(path string, old []byte) ([]byte, error) {
		return agentconfig.ClaudeMCP(path, old, pin)
	})
	if err != nil {
		return nil, err
	}
	settings, err := mergeFile(dir, agentconfig.ClaudeSettingsFile, func(path string, old []byte) ([]byte, error) {
		return agentconfig.ClaudeSettings(path, old, hookAgents[0].hooks(), pin)
	})
	if err != nil {
		return nil, err
	}
	return []configFile{mcpFile, settings}, nil
}

// setupGemini: crew mcp and a crew hook per event in
// .gemini/settings.json.
func setupGemini(dir string, pin []string) ([]configFile, error) {
	settings, err := mergeFile(dir, agentconfig.GeminiSettingsFile, func(path string, old []byte) ([]byte, error) {
		return agentconfig.GeminiSettings(path, old, hookAgents[1].hooks(), pin)
	})
	if err != nil {
		return nil, err
	}
	return []configFile{settings}, nil
}

// setupCodex: crew mcp as [mcp_servers.crew] in .codex/config.toml.
func setupCodex(dir string, pin []string) ([]configFile, error) {
	f, err := mergeFile(dir, agentconfig.CodexConfigFile, func(_ string, old []byte) ([]byte, error) {
		return agentconfig.CodexConfig(old, pin), nil
	})
	if err != nil {
		return nil, err
	}
	return []configFile{f}, nil
}
