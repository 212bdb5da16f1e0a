// crew completion: shell completion scripts for bash, zsh and fish.

package main

import (
	_ "embed"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
)

// Shell completion rests on what urfave/cli v2 (v2.27.7) provides: with
// App.EnableBashCompletion, a command line ending in
// --generate-bash-completion prints the commands that may follow, or the
// flags for a last word that starts with a dash (help.go,
// checkShellCompleteFlag, DefaultCompleteWithFlags), and App.ToFishCompletion
// writes a whole fish script (fish.go). The bash and zsh scripts that ask
// for those lists are not part of the Go package (they sit in its
// repository's autocomplete/ directory), so crew carries its own,
// adapted from them: completion/crew.bash and completion/crew.zsh.
var (
	//go:embed completion/crew.bash
	bashCompletion string
	//go:embed completion/crew.zsh
	zshCompletion string
)

// completeFlag is what the scripts append to the words typed so far.
const completeFlag = "--generate-bash-completion"

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:  "completion",
		Usage: "print a shell completion script: bash, zsh or fish",
		UsageText: "source <(crew completion bash)                        # in ~/.bashrc\n" +
			"crew completion zsh > \"${fpath[1]}/_crew\"              # then restart zsh\n" +
			"crew completion fish > ~/.config/fish/completions/crew.fish",
		ArgsUsage: "bash|zsh|fish",
		Action:    completion,
	}
}

func completion(c *cli.Context) error {
	if c.Args().Len() != 1 {
		return fmt.Errorf("completion takes one shell: bash, zsh or fish: %w", crew.ErrInvalid)
	}
	var script string
	switch shell := c.Args().First(); shell {
	case "bash":
		script = bashCompletion
	case "zsh":
		script = zshCompletion
	case "fish":
		s, err := c.App.ToFishCompletion()
		if err != nil {
			return err
		}
		script = s
	default:
		return fmt.Errorf("no completion for shell %q: use bash, zsh or fish: %w", shell, crew.ErrInvalid)
	}
	_, err := io.WriteString(c.App.Writer, script)
	return err
}
