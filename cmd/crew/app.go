package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/urfave/cli/v2"

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
		EnableBashCompletion: false,
		ExitErrHandler:       func(*cli.Context, error) {}, // Main reports errors and exits
		// Main turns this into an error (exit 2, JSON with --json).
		CommandNotFound: func(c *cli.Context, name string) { c.App.Metadata[unknownCommand] = name },
		Metadata:        map[string]any{},
		OnUsageError:    usageError,
		Commands:        commands(),
	}
	app.Setup()
	setUsageErrors(app.Commands)
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintf(c.App.Writer, "crew %s\n", c.App.Version) } // as crew version prints it
	return app
}

// unknownCommand is the App.Metadata key under which CommandNotFound
// leaves the name it did not find.
const unknownCommand = "unknownCommand"

func usageError(_ *cli.Context, err error, _ bool) error {
	return fmt.Errorf("%v (see --help): %w", err, crew.ErrInvalid)
}

func setUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		c.OnUsageError = usageError
		c.HideHelpCommand = true // --help on every command; no "help" subcommand
		setUsageErrors(c.Subcommands)
	}
}

func commands() []*cli.Command {
	var all []*cli.Command
	for _, group := range [][]*cli.Command{
		{initCommand(), runCommand(), taskCommand()},
		messageCommands(),
		readCommands(),
		{mailCommand(), watchCommand(), repairCommand(), versionCommand()},
	} {
		all = append(all, group...)
	}
	return all
}

// reorder moves flags ahead of positional arguments, so that flags may
// stand anywhere (urfave/cli v2 stops parsing flags at the first
// positional argument), and global flags ahead of the command name. "--"
// ends flags: everything after it stays positional. --help stays with the
// command it is given to.
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
	out := append(globals, path...)
	out = append(out, flags...)
	if help {
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

// env is what a command's action needs: the parsed context, the streams
// and the state root.
type env struct {
	c      *cli.Context
	stdout io.Writer
	stderr io.Writer
	json   bool
}

func newEnv(c *cli.Context) *env {
	return &env{c: c, stdout: c.App.Writer, stderr: c.App.ErrWriter, json: c.Bool("json")}
}

func (e *env) perm() crew.Perm {
	if e.c.Bool("shared-group") {
		return crew.SharedPerm
	}
	return crew.PrivatePerm
}

// root finds the state root: the NATS servers of --store / CREW_STORE,
// else --dir / CREW_DIR, else the nearest .crew.
func (e *env) root() (*run.Root, error) {
	if e.c.Int("max-body") <= 0 {
		return nil, fmt.Errorf("--max-body must be positive: %w", crew.ErrInvalid)
	}
	if n := e.c.Int("nats-replicas"); n < 1 || n > 5 {
		return nil, fmt.Errorf("--nats-replicas %d: a stream has 1 to 5 replicas: %w", n, crew.ErrInvalid)
	}
	if addr := e.c.String("store"); addr != "" {
		r, err := e.remoteRoot(addr)
		if err != nil {
			return nil, err
		}
		r.MaxBody = e.c.Int("max-body")
		return r, nil
	}
	dir := e.c.String("dir")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		dir = wd
	}
	r, err := run.Find(dir, e.perm())
	if err != nil {
		return nil, err
	}
	r.MaxBody = e.c.Int("max-body")
	return r, nil
}

// run opens the run named by --run / CREW_RUN, or the latest run.
func (e *env) run() (*run.Run, error) {
	root, err := e.root()
	if err != nil {
		return nil, err
	}
	if id := e.c.String("run"); id != "" {
		return root.Open(id)
	}
	return root.Latest()
}

// task returns the task named by --task / CREW_TASK; none is
// crew.ErrInvalid.
func (e *env) task() (string, error) {
	id := e.c.String("task")
	if id == "" {
		return "", fmt.Errorf("no task: give --task ID or set CREW_TASK: %w", crew.ErrInvalid)
	}
	return id, crew.ValidateID("task", id)
}

// actor returns --as / CREW_AGENT, or def.
func (e *env) actor(def string) (string, error) {
	if a := e.c.String("as"); a != "" {
		return a, crew.ValidateID("agent", a)
	}
	return def, nil
}

// body returns the message body from the argument at index i: "-" reads
// standard input; missing returns def.
func (e *env) body(i int, def string) (string, error) {
	args := e.c.Args()
	if args.Len() <= i {
		return def, nil
	}
	if args.Len() > i+1 {
		return "", fmt.Errorf("too many arguments: %q (quote the body, or use - and standard input): %w", args.Slice()[i:], crew.ErrInvalid)
	}
	b := args.Get(i)
	if b != "-" {
		return b, nil
	}
	data, err := io.ReadAll(io.LimitReader(e.c.App.Reader, int64(e.c.Int("max-body"))+1))
	if err != nil {
		return "", fmt.Errorf("read body from standard input: %w", err)
	}
	return string(data), nil
}

// emit prints one record: as a JSON line with --json, else as human text.
func (e *env) emit(v any, human string) error {
	if e.json {
		line, err := jsonLine(v)
		if err != nil {
			return err
		}
		_, err = e.stdout.Write(line)
		return err
	}
	if human == "" {
		return nil
	}
	_, err := fmt.Fprintln(e.stdout, human)
	return err
}

func jsonLine(v any) ([]byte, error) { return events.Marshal(v) }

// escape makes text safe for a terminal: control characters (other than
// newline and tab) and C1 controls are shown as Go escapes (\x1b), so a
// body cannot move the cursor, recolour or retitle the reader's terminal.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == unicode.ReplacementChar:
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 || unicode.In(r, unicode.Bidi_Control):
			q := fmt.Sprintf("%+q", string(r))
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// indent escapes s and indents every line after the first by pad.
func indent(s, pad string) string {
	return strings.ReplaceAll(escape(s), "\n", "\n"+pad)
}

// messageText is the human form of a message: a header line and its body.
func messageText(m *events.Message) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s  #%d  %s  %s -> %s", m.ID, m.Seq, m.Kind, escape(m.From), escape(m.To))
	if m.Priority != "" && m.Priority != "normal" {
		fmt.Fprintf(&b, "  [%s]", m.Priority)
	}
	fmt.Fprintf(&b, "  %s  %s\n    %s", m.Status, m.SentAt.Format(time.DateTime), indent(m.Body, "    "))
	return b.String()
}

// duration parses a --timeout / --older-than style value: Go durations
// (90s, 10m, 1h30m) plus days (2d).
func duration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		// Digits only, and few enough days that the duration does not
		// overflow (to a negative one that would time out at once).
		n, err := strconv.ParseInt(days, 10, 64)
		if err == nil && n >= 0 && days[0] != '+' && time.Duration(n) <= time.Duration(1<<63-1)/(24*time.Hour) {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("invalid duration %q: use e.g. 30s, 10m, 2h, 1d: %w", s, crew.ErrInvalid)
	}
	return d, nil
}
