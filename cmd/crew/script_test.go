package main

// CLI behaviour tests: the scripts in testdata/script/*.txtar at the
// repository root, run with github.com/rogpeppe/go-internal/testscript.
// Each script runs in a fresh work directory with an environment built
// from scratch (no CREW_* variable of the developer's shell leaks in), and
// `crew` in a script is the real command line: this test binary, re-executed
// as a subprocess, entering Main.
//
// Besides testscript's own commands, scripts may use:
//
//	exits CODE PROG [ARGS...]   run PROG; its exit status must be CODE
//	capture [-stderr] NAME [RE] set $NAME to the last stdout (trimmed), or to RE's first group in it
//	jsonlines N [KEY...]        the last stdout is exactly N lines, each a JSON object holding every KEY
//	waitstatus TASK STATUS      block until TASK (in $CREW_RUN, else the latest run) has STATUS;
//	                            STATUS worker-exited: until the exit of its last worker is recorded
//	waitfile FILE REGEXP        block until FILE exists and matches REGEXP
//	waitgone PGIDFILE           block until no process of the process group FILE names runs (Linux)
//
// The waits are bounded (a stuck script fails rather than hangs) but
// assert nothing about time.
//
// TestScriptNATS runs the same scripts again with CREW_STORE set to an
// embedded JetStream server of the script's own, with the condition
// [nats] true: a script states what only the file store has with
// [!nats] (crew init, the files under .crew), or skips with
// [nats] skip 'why' when it is about files.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/internal/teststores"
	"github.com/crew-dev/crew/run"
	natsstore "github.com/crew-dev/crew/store/nats"
	"github.com/crew-dev/crew/task"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"crew": func() { os.Exit(Main(os.Args, os.Stdin, os.Stdout, os.Stderr)) },
	})
}

func TestScript(t *testing.T) { testscript.Run(t, scriptParams(false)) }

// TestScriptNATS: the scripts on NATS JetStream, one embedded server per
// script, no .crew directory.
func TestScriptNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nats-server per script")
	}
	testscript.Run(t, scriptParams(true))
}

func scriptParams(nats bool) testscript.Params {
	setup := setupScript
	if nats {
		setup = func(e *testscript.Env) error {
			if err := setupScript(e); err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "crew-script-nats-")
			if err != nil {
				return err
			}
			var srv *server.Server
			if os.Getenv(teststores.AuthEnv) != "" {
				// Authorization on: a server from crew nats auth's
				// configuration, and a user of its account (the scripts
				// act as every agent over one set of credentials).
				var creds string
				srv, creds, err = teststores.AuthServer(dir)
				e.Setenv("CREW_NATS_CREDS", creds)
			} else {
				srv, err = natstest.Start(dir)
			}
			if err != nil {
				return err
			}
			e.Defer(func() {
				srv.Shutdown()
				os.RemoveAll(dir)
			})
			e.Setenv("CREW_STORE", srv.ClientURL())
			return nil
		}
	}
	return testscript.Params{
		Dir:                filepath.Join("..", "..", "testdata", "script"),
		RequireUniqueNames: true,
		Setup:              setup,
		Condition: func(cond string) (bool, error) {
			if cond == "nats" {
				return nats, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":      cmdExits,
			"capture":    cmdCapture,
			"jsonlines":  cmdJSONLines,
			"waitstatus": cmdWaitStatus,
			"waitfile":   cmdWaitFile,
			"waitgone":   cmdWaitGone,
			"natsserver": cmdNATSServer,
		},
	}
}

// setupScript gives each script a clean identity: no CREW_* variables, a
// home of its own, and no .crew above its work directory (which state root
// discovery would find).
func setupScript(e *testscript.Env) error {
	vars := e.Vars[:0]
	for _, kv := range e.Vars {
		if !strings.HasPrefix(kv, "CREW_") {
			vars = append(vars, kv)
		}
	}
	e.Vars = vars
	home := filepath.Join(e.WorkDir, ".home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return err
	}
	e.Setenv("HOME", home)
	for d := filepath.Dir(e.WorkDir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, run.DirName)); err == nil {
			return fmt.Errorf("a stray %s in %s would be found by state root discovery; remove it", run.DirName, d)
		}
		if filepath.Dir(d) == d {
			return nil
		}
	}
}

// scriptWait bounds the waiting commands: long enough for a slow CI
// machine, short enough that a broken wake-up fails the test.
const scriptWait = 60 * time.Second

// cmdExits runs a program and checks its exit status; stdout and stderr
// are kept for the next stdout/stderr commands.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: bad code %q", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// cmdCapture sets an environment variable from the last command's stdout
// (or, with -stderr, its stderr).
func cmdCapture(ts *testscript.TestScript, neg bool, args []string) {
	from := "stdout"
	if len(args) > 0 && args[0] == "-stderr" {
		from, args = "stderr", args[1:]
	}
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: capture [-stderr] NAME [REGEXP]")
	}
	out := ts.ReadFile(from)
	val := strings.TrimSpace(out)
	if len(args) == 2 {
		m := regexp.MustCompile(args[1]).FindStringSubmatch(out)
		if len(m) < 2 {
			ts.Fatalf("capture: %q does not match %s (or has no group)", args[1], from)
		}
		val = m[1]
	}
	if val == "" {
		ts.Fatalf("capture: nothing to capture for %s", args[0])
	}
	ts.Setenv(args[0], val)
}

// cmdJSONLines checks that the last stdout is N lines, each one JSON
// object with all the given keys.
func cmdJSONLines(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: jsonlines N [KEY...]")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("jsonlines: bad count %q", args[0])
	}
	out := ts.ReadFile("stdout")
	var lines []string
	if out != "" {
		if !strings.HasSuffix(out, "\n") {
			ts.Fatalf("jsonlines: stdout does not end with a newline")
		}
		lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	}
	if len(lines) != n {
		ts.Fatalf("jsonlines: stdout has %d lines, want %d", len(lines), n)
	}
	for i, l := range lines {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &obj); err != nil {
			ts.Fatalf("jsonlines: line %d is not a JSON object: %v", i+1, err)
		}
		for _, k := range args[1:] {
			if _, ok := obj[k]; !ok {
				ts.Fatalf("jsonlines: line %d has no key %q", i+1, k)
			}
		}
	}
}

// cmdWaitStatus blocks until a task has a status, woken by the run's log
// watcher.
func cmdWaitStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitstatus TASK STATUS")
	}
	var root *run.Root
	if addr := ts.Getenv("CREW_STORE"); addr != "" {
		s, err := natsstore.Dial(context.Background(), addr, natsstore.Options{Creds: ts.Getenv("CREW_NATS_CREDS")})
		ts.Check(err)
		defer s.Close()
		root = run.NewRoot(s)
	} else {
		var err error
		root, err = run.Find(ts.MkAbs("."), crew.PrivatePerm)
		ts.Check(err)
		defer root.Close()
	}
	var r *run.Run
	var err error
	if id := ts.Getenv("CREW_RUN"); id != "" {
		r, err = root.Open(id)
	} else {
		r, _, err = root.Latest()
	}
	ts.Check(err)
	w := r.Watch()
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), scriptWait)
	defer cancel()
	for {
		st, err := r.State()
		ts.Check(err)
		if t := st.Tasks[args[0]]; t != nil && t.Status == task.State(args[1]) {
			return
		}
		if t := st.Tasks[args[0]]; t != nil && args[1] == "worker-exited" && len(t.Workers) > 0 && t.Live() == nil {
			return
		}
		if err := w.Wait(ctx); err != nil {
			ts.Fatalf("waitstatus: task %s did not become %s: %v", args[0], args[1], err)
		}
	}
}

// cmdNATSServer starts an embedded nats-server from a configuration file
// (natsserver CONF: one that includes crew nats auth's auth.conf), shut
// down when the script ends, and points CREW_STORE at it.
func cmdNATSServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: natsserver CONF")
	}
	dir, err := os.MkdirTemp("", "crew-script-natsauth-")
	ts.Check(err)
	srv, err := natstest.StartConfig(ts.MkAbs(args[0]), dir)
	ts.Check(err)
	ts.Defer(func() {
		srv.Shutdown()
		os.RemoveAll(dir)
	})
	ts.Setenv("CREW_STORE", srv.ClientURL())
}

// cmdWaitFile blocks until a file exists and matches a regular expression.
// It polls: it watches the test, not the product.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitfile FILE REGEXP")
	}
	re := regexp.MustCompile("(?m)" + args[1])
	deadline := time.Now().Add(scriptWait)
	for {
		data, err := os.ReadFile(ts.MkAbs(args[0]))
		if err == nil && re.Match(data) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfile: %s never matched %q (last read: %v)\n%s", args[0], args[1], err, data)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cmdWaitGone blocks until no live process (one that exists and is no
// zombie waiting to be reaped) is in the process group whose id a file
// holds; it fails, and kills the group, if one still runs after
// scriptWait. It reads /proc: Linux only.
func cmdWaitGone(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitgone PGIDFILE")
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(ts.ReadFile(args[0])))
	if err != nil || pgid <= 1 {
		ts.Fatalf("waitgone: %s holds no process group id", args[0])
	}
	deadline := time.Now().Add(scriptWait)
	for {
		live := groupMembers(pgid)
		if len(live) == 0 {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(-pgid, syscall.SIGKILL)
			ts.Fatalf("waitgone: process group %d still runs: %s", pgid, strings.Join(live, "; "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// groupMembers returns the processes of process group pgid that are
// alive (not zombies), from /proc/<pid>/stat, as "pid (comm) state".
func groupMembers(pgid int) []string {
	dirs, _ := os.ReadDir("/proc")
	var live []string
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...: the fields after the last ')'.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			live = append(live, s[:i+1]+" "+f[0])
		}
	}
	return live
}

// TestHelpShowsExample checks every command, including any added later,
// for what help.txtar checks by name: --help exits 0 and shows the
// command's usage text (an example) first, with no placeholder usage.
func TestHelpShowsExample(t *testing.T) {
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden || c.Name == "help" {
				continue
			}
			p := append(append([]string{}, path...), c.Name)
			t.Run(strings.Join(p, "_"), func(t *testing.T) {
				if c.UsageText == "" {
					t.Fatalf("crew %s has no UsageText (an example)", strings.Join(p, " "))
				}
				var stdout, stderr strings.Builder
				code := Main(append(append([]string{"crew"}, p...), "--help"), strings.NewReader(""), &stdout, &stderr)
				if code != 0 {
					t.Fatalf("crew %s --help exited %d: %s", strings.Join(p, " "), code, stderr.String())
				}
				first, _, _ := strings.Cut(c.UsageText, "\n")
				want := "USAGE:\n   " + first + "\n"
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("crew %s --help does not start its usage with the example %q:\n%s", strings.Join(p, " "), first, stdout.String())
				}
			})
			walk(p, c.Subcommands)
		}
	}
	walk(nil, newApp(nil, io.Discard, io.Discard).Commands)
}
