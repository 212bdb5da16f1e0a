package storetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
)

// Store is one store under test.
type Store struct {
	// Name names the store in subtest names ("file", "nats").
	Name string
	// Addr is the address the Dialer given to Main opens the same store
	// at, in a helper process.
	Addr string
	// Root is a root on the store, as the Dialer opened it.
	Root *run.Root
	// AppendUnprojected, when set, appends ev (seq, run and time set; seq
	// the log's head+1) to its run's log as a writer that dies right
	// after its append would leave it: the event durable, none of its
	// projections (mail-tree copies) written. The test that the next
	// writer delivers them needs it, and is skipped without it.
	AppendUnprojected func(ctx context.Context, ev *events.Event) error
}

// Dialer opens the store addr names and returns a root on it and a
// function that closes it. Helper processes reopen a Store by its Addr
// with it.
type Dialer func(ctx context.Context, addr string) (root *run.Root, close func(), err error)

// helperEnv, set in a helper process's environment, holds what it is to
// do (helper).
const helperEnv = "CREW_STORETEST_HELPER"

// dial is what Main was given; nil when Main was not called.
var dial Dialer

// Main is for a TestMain: when the process was started as one of the
// suite's helper processes, it does the helper's work with dial and
// exits; otherwise it runs the tests (m.Run) and exits with their code.
func Main(m *testing.M, d Dialer) {
	dial = d
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(helper(h))
	}
	os.Exit(m.Run())
}

// A test is one conformance test, run on one store.
type test struct {
	name string
	f    func(t *testing.T, s Store)
}

// tests are the conformance tests, in the order Run runs them.
var tests = []test{
	// The store interface (log.go).
	{"Create", testCreate},
	{"CommitKeepsSeqDense", testCommitKeepsSeqDense},
	{"RaceExactlyOneWins", testRaceExactlyOneWins},
	{"ConcurrentWritersDense", testConcurrentWritersDense},
	{"WatchWakes", testWatchWakes},
	// The operations on a root of the store (run.go).
	{"RunTransitions", testRunTransitions},
	{"RunMessagesAndTerminalTasks", testRunMessagesAndTerminalTasks},
	{"RunInboxCursorsAndDeliveryStatus", testRunInboxCursorsAndDeliveryStatus},
	{"RunBadInput", testRunBadInput},
	{"RunMailTree", testRunMailTree},
	{"RunLostCopyIsDeliveredByTheNextWriter", testRunLostCopyIsDeliveredByTheNextWriter},
	{"RunRespondRaceExactlyOneWins", testRunRespondRaceExactlyOneWins},
	{"RunConcurrentWriters", testRunConcurrentWriters},
	{"RunAskWaitIsWoken", testRunAskWaitIsWoken},
}

// Run runs every conformance test as a subtest (TestX/Create/file), on
// each of the stores that stores starts, fresh, for that test (it
// cleans them up with t.Cleanup). The test binary's TestMain must call
// Main.
func Run(t *testing.T, stores func(t *testing.T) []Store) {
	if dial == nil {
		t.Fatal("storetest.Run needs a TestMain that calls storetest.Main: the suite's helper processes are this test binary")
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			for _, s := range stores(t) {
				t.Run(s.Name, func(t *testing.T) { c.f(t, s) })
			}
		})
	}
}

// bound turns a hang into a failure; it asserts nothing about speed.
const bound = 60 * time.Second

func ctxBound(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	return ctx
}

// outcome prints what a racer's attempt came to, won (nil) or lost
// (crew.ErrConflict), or its error, and returns its exit code.
func outcome(err error) int {
	switch {
	case err == nil:
		fmt.Println("won")
	case errors.Is(err, crew.ErrConflict):
		fmt.Println("lost")
	default:
		fmt.Println(err)
		return 1
	}
	return 0
}

// awaitBarrier says the process is ready (a file barrier.ready-PID) and
// returns once the file barrier exists ("" for none). It polls: it
// synchronises the test's processes, not the product.
func awaitBarrier(barrier string) {
	if barrier == "" {
		return
	}
	os.WriteFile(fmt.Sprintf("%s.ready-%d", barrier, os.Getpid()), nil, 0o600)
	for {
		if _, err := os.Stat(barrier); err == nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// race starts n helper processes in mode on s's run r1, the i-th named
// prefix+i and given args, releases them together, and returns what each
// printed.
func race(t *testing.T, s Store, n int, mode, prefix string, args ...string) []string {
	t.Helper()
	barrier := filepath.Join(t.TempDir(), "go")
	return spawn(t, n, func(i int) string {
		return strings.Join(append([]string{mode, s.Addr, "r1", barrier, fmt.Sprint(prefix, i)}, args...), "|")
	}, func() { os.WriteFile(barrier, nil, 0o600) })
}

// spawn starts n helper processes (this test binary, helper mode given by
// spec(i)), calls release once all are at their barrier (its
// ".ready-PID" files), and returns what each printed.
func spawn(t *testing.T, n int, spec func(i int) string, release func()) []string {
	t.Helper()
	outs := make([]string, n)
	var wg sync.WaitGroup
	cmds := make([]*exec.Cmd, n)
	bufs := make([]*strings.Builder, n)
	for i := range n {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), helperEnv+"="+spec(i))
		bufs[i] = &strings.Builder{}
		c.Stdout, c.Stderr = bufs[i], bufs[i]
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = c
	}
	if release != nil {
		waitReady(t, spec(0), n)
		release()
	}
	for i, c := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Wait()
			outs[i] = bufs[i].String()
		}()
	}
	wg.Wait()
	return outs
}

// waitReady waits until n helpers are at the barrier named in spec (its
// fourth field), or one of them failed to get there (it then prints why,
// which the test reports).
func waitReady(t *testing.T, spec string, n int) {
	t.Helper()
	barrier := strings.Split(spec, "|")[3]
	deadline := time.Now().Add(bound)
	for {
		ready, _ := filepath.Glob(barrier + ".ready-*")
		if len(ready) >= n || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// helper is a helper process, given "MODE|ADDR|RUN|BARRIER|NAME|ARGS…":
// it opens the store at ADDR with the Dialer given to Main, and does
// what MODE says (logHelper's modes, runHelper's). It returns the
// process's exit code.
func helper(spec string) int {
	f := strings.Split(spec, "|")
	if len(f) < 5 {
		fmt.Printf("bad %s %q\n", helperEnv, spec)
		return 2
	}
	mode, addr, id, barrier, name := f[0], f[1], f[2], f[3], f[4]
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	root, closer, err := dial(ctx, addr)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer closer()
	if code, ok := logHelper(ctx, mode, root, id, barrier, name, f[5:]); ok {
		return code
	}
	if code, ok := runHelper(ctx, mode, root, id, barrier, name, f[5:]); ok {
		return code
	}
	fmt.Printf("unknown helper mode %q\n", mode)
	return 2
}
