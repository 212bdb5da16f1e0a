// The crew application: its global flags and the flags several commands
// share, the list of commands, usage errors, and reorder (flags may
// stand anywhere on the command line).

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
	"github.com/xrash/smetrics"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
)

// Global flags: accepted before or after the command name.
var globalFlags = append([]cli.Flag{
	&cli.StringFlag{Name: "dir", Usage: "state root `DIR` (default: the nearest .crew above the working directory)", EnvVars: []string{"CREW_DIR"}},
	&cli.BoolFlag{Name: "json", Usage: "machine output: one JSON object per record, one per line", EnvVars: []string{"CREW_JSON"}},
	&cli.BoolFlag{Name: "shared-group", Usage: "create files 0660 and directories 2770 (group-shared) instead of 0600/0700"},
	&cli.IntFlag{Name: "max-body", Usage: "largest message body in `BYTES`", Value: run.DefaultMaxBody},
}, storeFlags...)

// Identity flags of commands that act in a run.
var (
	runFlag  = &cli.StringFlag{Name: "run", Usage: "run `ID` (default: the most recently created run)", EnvVars: []string{"CREW_RUN"}}
	taskFlag = &cli.StringFlag{Name: "task", Usage: "the worker's task `ID`", EnvVars: []string{"CREW_TASK"}}
	asFlag   = &cli.StringFlag{Name: "as", Usage: "acting agent `NAME` (default: leader, or the task's agent for worker commands)", EnvVars: []string{"CREW_AGENT"}}
)

// Flags shared by commands that send or read messages.
var (
	priorityFlag = &cli.StringFlag{Name: "priority", Usage: "`P`: low, normal, high or urgent", Value: events.DefaultPriority}
	sinceFlag    = &cli.StringFlag{Name: "since", Usage: "only records with seq greater than `SEQ` (a decimal number)"}
	followFlag   = &cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new records as they arrive (Ctrl-C ends)"}
)

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:  "crew",
		Usage: "coordinate a leader agent and its workers through durable JSONL mailboxes",
		UsageText: `crew init
crew run create --id r1 && crew task add t1 --run r1
CREW_RUN=r1 CREW_TASK=t1 crew ask "Which database?" --wait
crew respond t1 "Use Postgres." --run r1`,
		Version:              version,
		Flags:                globalFlags,
		Reader:               stdin,
		Writer:               stdout,
		ErrWriter:            stderr,
		HideHelpCommand:      true,
		EnableBashCompletion: true,                         // crew completion (completion.go)
		ExitErrHandler:       func(*cli.Context, error) {}, // Main reports errors and exits
		// Main turns this into an error (exit 2, JSON with --json).
		CommandNotFound: func(c *cli.Context, name string) {
			c.App.Metadata[unknownCommand] = strings.TrimSpace(commandPath(c) + " " + name)
		},
		Metadata:     map[string]any{},
		OnUsageError: usageError,
		Commands:     commands(),
		// cli's template, and the exit codes after it.
		CustomAppHelpTemplate: cli.AppHelpTemplate + exitCodesHelp(),
	}
	app.Setup()
	app.Action = needsCommand
	setUsageErrors(app.Commands)
	return app
}

// needsCommand is the action of crew itself and of each command that
// only groups others (run, task, mail, ...): given no command, it is a
// usage error (exit 2) naming them, as go and git refuse a command line
// with no command, instead of cli's help on standard output and exit 0,
// which a script would take for success. A word that names no command is
// left to cli, which reports it through CommandNotFound (unknown).
func needsCommand(c *cli.Context) error {
	if c.Args().Present() {
		return cli.ShowCommandHelp(c, c.Args().First())
	}
	path := commandPath(c)
	if path == "" {
		return fmt.Errorf("no command given; crew --help lists the commands: %w", crew.ErrInvalid)
	}
	var names []string
	for _, sub := range c.Command.Subcommands {
		if !sub.Hidden {
			names = append(names, sub.Name)
		}
	}
	return fmt.Errorf("crew %s needs a command: %s; crew %s --help says what each does: %w", path, strings.Join(names, ", "), path, crew.ErrInvalid)
}

func init() {
	// Set once, not per app: crew mcp runs several apps at once.
	cli.VersionPrinter = func(c *cli.Context) { printVersion(c) } // --version prints as crew version does, --json too
}

// unknownCommand is the App.Metadata key under which CommandNotFound
// leaves the name it did not find.
const unknownCommand = "unknownCommand"

// commandWords is the App.Metadata key under which reorder leaves the
// words of the command line that name commands (["hook", "claude"]).
const commandWords = "commandWords"

// commandLine is the App.Metadata key of the arguments crew was given
// (before reorder), for the hints that show a corrected command line.
const commandLine = "commandLine"

func usageError(c *cli.Context, err error, _ bool) error {
	name, unknownFlag := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if unknownFlag {
		// A typo of one of the command's flags (--priorty): name it.
		var names []string
		for _, f := range append(slices.Clone(c.Command.Flags), globalFlags...) {
			names = append(names, f.Names()...)
		}
		if near := nearest(name, names); near != "" {
			return fmt.Errorf("crew %s has no flag -%s; did you mean %s? (see --help): %w", commandPath(c), name, dashes(near), crew.ErrInvalid)
		}
	}
	// A body that starts with a dash (crew steer t1 "-x is wrong") is
	// taken for a flag cli does not know.
	if unknownFlag && takesBody(c.Command) {
		if word, fixed := dashBody(c, func(a string) bool { n, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); return n == name }); word != "" {
			return fmt.Errorf("%q was read as a flag, and crew %s has no such flag; if it is the message body, put -- before it: %s: %w", word, commandPath(c), fixed, crew.ErrInvalid)
		}
	}
	return fmt.Errorf("%v (see --help): %w", err, crew.ErrInvalid)
}

// commandPath is the command c runs, as typed after crew ("task list"),
// "" for crew itself.
func commandPath(c *cli.Context) string {
	var names []string
	for _, l := range c.Lineage() {
		if l.Command != nil && l.Command.Name != "" && l.Command.Name != c.App.Name { // not crew's own
			names = append([]string{l.Command.Name}, names...)
		}
	}
	return strings.Join(names, " ")
}

// nearest returns the one of names that typed is most likely a typo of,
// or "" when none is close: a Jaro-Winkler similarity of at least 0.85
// (xrash/smetrics, the measure urfave/cli's own suggestions use; "priorty"
// is 0.975 from "priority", "stear" 0.91 from "steer", "foo" 0.82 from
// "follow-up").
func nearest(typed string, names []string) string {
	best, near := 0.85, ""
	for _, n := range names {
		if s := smetrics.JaroWinkler(typed, n, 0.7, 4); s >= best {
			best, near = s, n
		}
	}
	return near
}

// dashes is a flag's name as typed: -x or --name.
func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// takesBody reports whether cmd's arguments end with a message body.
func takesBody(cmd *cli.Command) bool { return strings.Contains(cmd.ArgsUsage, "BODY") }

// dashBody finds the last word of the command line before "--" that
// starts with a dash and that flag accepts, and returns it with the
// command line that passes it as the body instead: the word moved to the
// end, after "--", every word quoted for a shell. It returns "" when
// there is none.
func dashBody(c *cli.Context, flag func(string) bool) (word, fixed string) {
	args, _ := c.App.Metadata[commandLine].([]string)
	at := -1
	for i, a := range args {
		if a == "--" {
			break
		}
		if len(a) > 1 && a[0] == '-' && flag(a) {
			at = i
		}
	}
	if at < 0 {
		return "", ""
	}
	words := []string{"crew"}
	for i, a := range args {
		if i != at {
			words = append(words, shellQuote(a))
		}
	}
	if !slices.Contains(args, "--") {
		words = append(words, "--")
	}
	return args[at], strings.Join(append(words, shellQuote(args[at])), " ")
}

// shellQuote quotes s for a POSIX shell: as it is when it has only
// characters no shell treats specially, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func setUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		c.OnUsageError = usageError
		c.HideHelpCommand = true // --help on every command; no "help" subcommand
		if len(c.Subcommands) > 0 && c.Action == nil {
			c.Action = needsCommand
		}
		setUsageErrors(c.Subcommands)
	}
}

func commands() []*cli.Command {
	var all []*cli.Command
	for _, group := range [][]*cli.Command{
		{initCommand(), runCommand(), taskCommand(), spawnCommand(), heartbeatCommand()},
		{askCommand(), awaitCommand(), respondCommand(), steerCommand(), followUpCommand(), nudgeCommand(), broadcastCommand(), reportCommand()},
		{inboxCommand(), outboxCommand(), ackCommand(), rejectCommand(), pendingCommand(), eventsCommand()},
		{mailCommand(), watchCommand(), serveCommand(), repairCommand(), versionCommand()},
		{mcpCommand(), hookCommand(), setupCommand(), natsCommand(), completionCommand()},
	} {
		all = append(all, group...)
	}
	return all
}

// reorder moves flags ahead of positional arguments, so that flags may
// stand anywhere (urfave/cli v2 stops parsing flags at the first
// positional argument), and global flags ahead of the command name. "--"
// ends flags: everything after it stays positional. --help stays with the
// command it is given to; given with a word that names no command where
// one is expected (crew bogus --help), reorder leaves that word in
// app.Metadata[unknownCommand].
func reorder(app *cli.App, args []string) []string {
	var globals, path, flags, positional []string
	help := false
	cmds := app.Commands
	var cur *cli.Command
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			// The "--" itself is dropped: one is added before all the
			// positional arguments below, so an earlier positional (crew
			// steer t1 -- -x) does not leave it standing as an argument.
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			isHelp := name == "help" || name == "h"
			help = help || isHelp
			global, boolean := flagKind(app, cur, name, isHelp)
			dst := &flags
			if global {
				dst = &globals
			}
			*dst = append(*dst, a)
			if !hasValue && !boolean && i+1 < len(args) {
				i++
				*dst = append(*dst, args[i])
			}
			continue
		}
		if next := subcommand(cmds, a); next != nil && len(positional) == 0 {
			path = append(path, a)
			cur, cmds = next, next.Subcommands
			continue
		}
		positional = append(positional, a)
	}
	app.Metadata[commandWords] = path
	out := append(globals, path...)
	out = append(out, flags...)
	if help {
		if len(positional) > 0 && (cur == nil || len(cur.Subcommands) > 0) {
			// crew bogus --help: no command to show help on; cli would
			// show its parent's and exit 0.
			app.Metadata[unknownCommand] = strings.Join(append(path, positional[0]), " ")
		}
		// cli would take the first argument for a subcommand to show help
		// on; the help asked for is the command's.
		positional = nil
	}
	if len(positional) > 0 {
		out = append(out, "--")
	}
	return append(out, positional...)
}

// flagKind tells reorder where the flag name goes (global: ahead of the
// command name; --help never is) and whether it is boolean (takes no
// separate value). A flag before the command name (crew --run r1 task
// list) is judged by the commands that define it; an unknown one counts
// as boolean and is left for cli to refuse.
func flagKind(app *cli.App, cur *cli.Command, name string, isHelp bool) (global, boolean bool) {
	if known, b := lookupFlag(name, app.Flags); known && !isHelp {
		return true, b
	}
	fs := allFlags(app.Commands)
	if cur != nil {
		fs = append(append([]cli.Flag{}, cur.Flags...), app.Flags...)
	}
	if known, b := lookupFlag(name, fs); known {
		return false, b
	}
	return false, true
}

// lookupFlag reports whether one of fs is called name, and whether it is
// a boolean flag.
func lookupFlag(name string, fs []cli.Flag) (known, boolean bool) {
	for _, f := range fs {
		if slices.Contains(f.Names(), name) {
			_, b := f.(*cli.BoolFlag)
			return true, b
		}
	}
	return false, false
}

// subcommand returns the command of cmds called name, or nil.
func subcommand(cmds []*cli.Command, name string) *cli.Command {
	var found *cli.Command
	for _, c := range cmds {
		if c.HasName(name) {
			found = c
		}
	}
	return found
}

// allFlags returns the flags of cmds and of all their subcommands.
func allFlags(cmds []*cli.Command) []cli.Flag {
	var fs []cli.Flag
	for _, c := range cmds {
		fs = append(fs, c.Flags...)
		fs = append(fs, allFlags(c.Subcommands)...)
	}
	return fs
}
