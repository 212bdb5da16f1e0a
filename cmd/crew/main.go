// Command crew coordinates a leader agent and its worker agents through
// durable JSONL mailboxes. See README.md and docs/; `crew --help` lists
// the commands.
//
// This package is thin: it parses flags (github.com/urfave/cli/v2), calls
// package run, prints, and maps errors to exit codes in one place (exitCode).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/human"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		// A soft limit (GOMEMLIMIT's default for crew): a command that
		// streams a large mailbox collects garbage before its heap doubles,
		// instead of only when it has (GOGC=100). Small commands never
		// reach it.
		debug.SetMemoryLimit(memoryLimit)
	}
	if err := handOverIfNeeded(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "crew: %s\n", err)
		os.Exit(exitIO)
	}
	os.Exit(Main(os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// memoryLimit is the soft memory limit of a crew process, in bytes.
const memoryLimit = 52 << 20

// Main runs crew with the given arguments and streams and returns its exit
// code. It is what main calls, and what the testscript tests run.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := execute(ctx, args, stdin, stdout, stderr)
	if err == nil {
		return 0
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "crew: interrupted")
		return exitInterrupted
	}
	return report(stderr, err, jsonRequested(args[1:]))
}

// execute runs one crew command line (args[0] is the program's name)
// and returns its error: what Main reports, and what crew mcp turns into
// a tool result.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	app := newApp(stdin, stdout, stderr)
	sc := &storeConn{}
	app.Metadata[storeKey] = sc
	defer sc.close()
	app.Metadata[commandLine] = args[1:]
	rest := args[1:]
	if len(rest) == 0 || rest[len(rest)-1] != completeFlag {
		// Not for a completion request, which cli recognises by its last
		// word: the words typed so far stay in their order.
		rest = reorder(app, rest)
		if name, ok := app.Metadata[unknownCommand].(string); ok {
			return unknown(app, name)
		}
	}
	err := explain(app, app.RunContext(ctx, append(args[:1:1], rest...)))
	if name, ok := app.Metadata[unknownCommand].(string); ok && err == nil {
		err = unknown(app, name)
	}
	if words, _ := app.Metadata[commandWords].([]string); err != nil && len(words) > 0 && words[0] == "hook" {
		err = hookFailure(err)
	}
	return err
}

// unknown is the error of a command line naming no command of crew's
// (exit 2), name the words that name none ("bogus", "task bogus"), with
// the command it is most likely a typo of (crew stear: steer).
func unknown(app *cli.App, name string) error {
	words := strings.Fields(name)
	cmds := app.Commands
	for _, w := range words[:len(words)-1] {
		if c := subcommand(cmds, w); c != nil {
			cmds = c.Subcommands
		}
	}
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Names()...)
		}
	}
	hint := "crew --help lists the commands"
	if len(words) > 1 {
		hint = "crew " + strings.Join(words[:len(words)-1], " ") + " --help lists its commands"
	}
	if words[len(words)-1] == "help" {
		// There is no help command (every command has --help), as a
		// newcomer used to git help or go help expects.
		hint = "crew COMMAND --help shows a command's help, " + hint
	} else if near := nearest(words[len(words)-1], names); near != "" {
		hint = "did you mean " + strings.Join(append(words[:len(words)-1:len(words)-1], near), " ") + "? " + hint
	}
	return fmt.Errorf("unknown command %q; %s: %w", name, hint, crew.ErrInvalid)
}

// Exit codes (docs/cli.md, Exit codes): crew's, by their sentinels.
const (
	exitOK          = crew.ExitOK
	exitIO          = crew.ExitIO
	exitInvalid     = crew.ExitInvalid
	exitConflict    = crew.ExitConflict
	exitNotFound    = crew.ExitNotFound
	exitTimeout     = crew.ExitTimeout
	exitIncomplete  = crew.ExitIncomplete
	exitDamaged     = crew.ExitDamaged
	exitTampered    = crew.ExitTampered
	exitDenied      = crew.ExitDenied
	exitInterrupted = crew.ExitInterrupted
)

// exitCodes are the exit codes and what each means, as crew --help lists
// them (README.md and docs/cli.md have the same table; the test
// TestExitCodesDocumented keeps them in step).
var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitOK, "success"},
	{exitIO, "I/O or internal error (the message says what failed)"},
	{exitInvalid, "invalid input: no command or an unknown one, a bad flag, id or body"},
	{exitConflict, "conflict: not allowed in the task's current state"},
	{exitNotFound, "not found: no state root, unknown run, task, agent or message"},
	{exitTimeout, "timed out waiting"},
	{exitIncomplete, "run wait: every task ended, but not all completed"},
	{exitDamaged, "the log is damaged or has a gap; what could be read was printed"},
	{exitTampered, "the state root was tampered with: a symbolic link or a file of another kind where crew keeps its own"},
	{exitDenied, "denied: the NATS server refused these credentials' agent the operation (docs/nats.md, Authorization)"},
	{exitInterrupted, "interrupted: Ctrl-C (SIGINT) or SIGTERM, also the normal end of --follow"},
}

// exitCodesHelp is the EXIT CODES section crew --help ends with.
func exitCodesHelp() string {
	var b strings.Builder
	b.WriteString("\nEXIT CODES:\n")
	for _, c := range exitCodes {
		fmt.Fprintf(&b, "   %-4d %s\n", c.code, c.meaning)
	}
	return b.String()
}

// exitCode maps an error to its exit code and class: crew.Code, and the
// code of a cli.Exit error.
func exitCode(err error) (int, string) {
	var ec cli.ExitCoder
	if code, class := crew.Code(err); class != "io" || !errors.As(err, &ec) {
		return code, class
	}
	return ec.ExitCode(), "error"
}

// report prints err as "crew: <message>" (and, with --json, as a JSON
// object too) on stderr and returns the exit code.
func report(stderr io.Writer, err error, asJSON bool) int {
	code, kind := exitCode(err)
	msg := message(err)
	if msg != "" {
		fmt.Fprintf(stderr, "crew: %s\n", human.Escape(msg))
	}
	if asJSON {
		line, _ := jsonLine(map[string]any{"error": map[string]any{"code": kind, "exit": code, "message": msg}})
		stderr.Write(line)
	}
	return code
}

// message is the text of err without its sentinel's words (crew.Message).
func message(err error) string { return crew.Message(err) }

// jsonRequested reports whether errors are to be written as JSON too: as
// the --json flag decides (the last --json[=BOOL] before "--", else
// CREW_JSON), even when parsing failed before the flag was read.
func jsonRequested(args []string) bool {
	on, _ := strconv.ParseBool(os.Getenv("CREW_JSON"))
	for _, a := range args {
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "json" {
			continue
		}
		on = true
		if hasValue {
			on, _ = strconv.ParseBool(value)
		}
	}
	return on
}
