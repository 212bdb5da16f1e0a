// Shared by the commands: env, what an action reads from its context
// (the state root, the run, the task, the acting agent, the body) and
// the parsing of durations and timeouts.

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/run"
)

// env is what a command's action needs: the parsed context, the streams
// and the state root.
type env struct {
	c      *cli.Context
	stdout io.Writer
	stderr io.Writer
	json   bool
	a      *app.App // app's, made at its first call
}

func newEnv(c *cli.Context) *env {
	e := &env{c: c, stdout: c.App.Writer, stderr: c.App.ErrWriter, json: c.Bool("json")}
	if c.App.Metadata != nil {
		c.App.Metadata[commandEnv] = e
	}
	return e
}

// commandEnv is the App.Metadata key of the env of the command that ran,
// whose identity explains its error (explain).
const commandEnv = "env"

// explain adds to err what the command line can tell of it: how to give
// a body it lacked (run.EmptyBodyError), in the command line's terms,
// and what the identity of the command that ran can tell
// (app.App.Explain: the run taken as the newest, the run that holds an
// unknown task).
func explain(a *cli.App, err error) error {
	var eb *run.EmptyBodyError
	if errors.As(err, &eb) {
		// How to give a body, in the command line's terms.
		if eb.Kind == "mail" {
			return fmt.Errorf("empty mail: give a body (or - to read it from standard input) or a --subject: %w", crew.ErrInvalid)
		}
		return fmt.Errorf("empty %s: give a body, or - to read it from standard input: %w", eb.Kind, crew.ErrInvalid)
	}
	if e, ok := a.Metadata[commandEnv].(*env); ok && err != nil {
		return e.app().Explain(err)
	}
	return err
}

// app returns the application layer for this command: the state root
// (root) and the identity of --run, --task and --as (CREW_RUN,
// CREW_TASK, CREW_AGENT).
func (e *env) app() *app.App {
	if e.a == nil {
		e.a = app.New(e.root, app.Identity{Run: e.c.String("run"), Task: e.c.String("task"), As: e.c.String("as")})
	}
	return e.a
}

// noteTaken says on standard error which run a listing shows when none
// was given and the root holds others (app.App.Taken): a listing of the
// newest run looks like an empty one of the run meant. Not with --json,
// whose records name their run.
func (e *env) noteTaken() {
	if t := e.app().Taken(); t != nil && !e.json {
		fmt.Fprintf(e.stderr, "crew: run %s, the newest of %d runs (--run or CREW_RUN names another)\n", t.Run, t.Runs)
	}
}

// workerApp is app for a command that takes no identity flags but is a
// worker's sign of life (mail read, app.App.MailRead): its identity is
// the worker's environment, CREW_RUN and CREW_TASK.
func (e *env) workerApp() *app.App {
	return app.New(e.root, app.Identity{Run: os.Getenv("CREW_RUN"), Task: os.Getenv("CREW_TASK"), As: e.c.String("as")})
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
	// Found once per command line, like a store dialled (dialStore:
	// crew mcp's tool calls share it), and closed when it ends, which
	// waits for the snapshots its runs still write (run.Root.Close).
	found, err := e.dialStore(func() (io.Closer, error) {
		dir := e.c.String("dir")
		if dir == "" {
			wd, err := os.Getwd()
			if err != nil {
				return nil, err
			}
			dir = wd
		}
		// A command line may be crew mcp's server, whose tool calls share
		// the root: each run's Log and the state it keeps, as on NATS.
		return run.FindKept(dir, e.perm())
	})
	if err != nil {
		return nil, err
	}
	r := *found.(*run.Root) // a copy: MaxBody is this command's
	r.MaxBody = e.c.Int("max-body")
	return &r, nil
}

// run opens the run named by --run / CREW_RUN, or the latest run.
func (e *env) run() (*run.Run, error) { return e.app().Run("") }

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
// standard input; missing returns def. A body missing because cli read
// it as a global flag (crew steer t1 --json) is crew.ErrInvalid, saying
// how to pass it instead.
func (e *env) body(i int, def string) (string, error) {
	if e.c.Args().Len() <= i && def == "" {
		if word, fixed := dashBody(e.c, func(a string) bool {
			known, boolean := lookupFlag(strings.TrimLeft(a, "-"), e.c.App.Flags)
			return known && boolean
		}); word != "" {
			return "", fmt.Errorf("no body given: %q was read as a flag; if it is the message body, put -- before it: %s: %w", word, fixed, crew.ErrInvalid)
		}
	}
	return e.optionalBody(i, def)
}

// optionalBody is body for a command whose body may be missing (crew
// mail send with a --subject).
func (e *env) optionalBody(i int, def string) (string, error) {
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
	max := e.c.Int("max-body")
	data, err := io.ReadAll(io.LimitReader(e.c.App.Reader, int64(max)+1))
	if err != nil {
		return "", fmt.Errorf("read body from standard input: %w", err)
	}
	if len(data) > max {
		// Over the limit: count the rest, so that the error states the
		// body's real size, up to a bound (standard input may not end).
		bound := 16 * int64(max)
		rest, err := io.Copy(io.Discard, io.LimitReader(e.c.App.Reader, bound))
		if err != nil {
			return "", fmt.Errorf("read body from standard input: %w", err)
		}
		what := "message"
		for _, c := range e.c.Lineage() {
			if c.Command != nil && c.Command.Name == "mail" {
				what = "mail"
			}
		}
		return "", run.BodyOverLimit(what, int64(len(data))+rest, rest == bound, max)
	}
	return string(data), nil
}

// since returns --since: a seq, written as a plain decimal number (cli's
// integer flags would take 0x5 as hex), 0 when not given.
func (e *env) since() (int64, error) {
	s := e.c.String("since")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || s[0] == '+' {
		return 0, fmt.Errorf("invalid --since %q: a seq is a decimal whole number, 0 or more (crew events shows the seqs): %w", s, crew.ErrInvalid)
	}
	return n, nil
}

// duration parses a --timeout / --older-than style value (app.ParseDuration).
func duration(s string) (time.Duration, error) { return app.ParseDuration(s) }
