// Package proctest is the process harness of crew's conformance suites
// (store/storetest, run/runtest): racing and concurrent writers are real
// processes, the test binary started again in a helper mode (Spec) that
// opens the store by its address, and released together at a barrier.
// It knows no store and no operation: each suite says what a helper
// does (Main's helper).
package proctest

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
)

// Bound turns a hang into a failure; it asserts nothing about speed.
const Bound = 60 * time.Second

// Ctx returns a context that ends after Bound, or when t is done.
func Ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Bound)
	t.Cleanup(cancel)
	return ctx
}

// A Spec is what one helper process is to do: its mode (the suite's
// word), the address of the store (the suite's Dialer opens it), the
// run, the barrier file it waits for ("" for none), its name and the
// mode's arguments.
type Spec struct {
	Mode, Addr, Run, Barrier, Name string
	Args                           []string
}

// env, set in a helper process's environment, holds its Spec, its
// fields joined by "|".
const env = "CREW_CONFORMANCE_HELPER"

func (s Spec) String() string {
	return strings.Join(append([]string{s.Mode, s.Addr, s.Run, s.Barrier, s.Name}, s.Args...), "|")
}

func parse(v string) (Spec, bool) {
	f := strings.Split(v, "|")
	if len(f) < 5 {
		return Spec{}, false
	}
	return Spec{Mode: f[0], Addr: f[1], Run: f[2], Barrier: f[3], Name: f[4], Args: f[5:]}, true
}

// helping is the helper Main was given; nil when Main was not called.
var helping func(context.Context, Spec) int

// Main is for a TestMain: when the process was started as a helper, it
// runs helper with the helper's Spec (and a context bounded by Bound)
// and exits with the code it returns; otherwise it runs the tests
// (m.Run) and exits with their code.
func Main(m *testing.M, helper func(context.Context, Spec) int) {
	helping = helper
	if v := os.Getenv(env); v != "" {
		s, ok := parse(v)
		if !ok {
			fmt.Printf("bad %s %q\n", env, v)
			os.Exit(2)
		}
		ctx, cancel := context.WithTimeout(context.Background(), Bound)
		code := helper(ctx, s)
		cancel()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// Ready fails t unless the test binary's TestMain called Main.
func Ready(t *testing.T) {
	t.Helper()
	if helping == nil {
		t.Fatal("the conformance suite needs a TestMain that calls its Main: its helper processes are this test binary")
	}
}

// Outcome prints what a racer's attempt came to, won (nil) or lost
// (crew.ErrConflict), or its error, and returns its exit code.
func Outcome(err error) int {
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

// AwaitBarrier says the process is ready (a file barrier.ready-PID) and
// returns once the file barrier exists ("" for none). It polls: it
// synchronises the test's processes, not the product.
func AwaitBarrier(barrier string) {
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

// Race starts n helper processes in mode on the store at addr, run r1,
// the i-th named prefix+i and given args, releases them together, and
// returns what each printed.
func Race(t *testing.T, addr string, n int, mode, prefix string, args ...string) []string {
	t.Helper()
	barrier := filepath.Join(t.TempDir(), "go")
	return Spawn(t, n, func(i int) Spec {
		return Spec{Mode: mode, Addr: addr, Run: "r1", Barrier: barrier, Name: fmt.Sprint(prefix, i), Args: args}
	}, func() { os.WriteFile(barrier, nil, 0o600) })
}

// Spawn starts n helper processes (this test binary, the i-th given
// spec(i)), calls release once all are at their barrier (its
// ".ready-PID" files), and returns what each printed.
func Spawn(t *testing.T, n int, spec func(i int) Spec, release func()) []string {
	t.Helper()
	outs := make([]string, n)
	var wg sync.WaitGroup
	cmds := make([]*exec.Cmd, n)
	bufs := make([]*strings.Builder, n)
	for i := range n {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), env+"="+spec(i).String())
		bufs[i] = &strings.Builder{}
		c.Stdout, c.Stderr = bufs[i], bufs[i]
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = c
	}
	if release != nil {
		waitReady(spec(0).Barrier, n)
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

// waitReady waits until n helpers are at barrier, or Bound passed (one
// of them failed to get there: it then prints why, which the test
// reports).
func waitReady(barrier string, n int) {
	deadline := time.Now().Add(Bound)
	for {
		ready, _ := filepath.Glob(barrier + ".ready-*")
		if len(ready) >= n || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Pluck returns f of each of xs, in order.
func Pluck[T, V any](xs []T, f func(T) V) []V {
	var out []V
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}
