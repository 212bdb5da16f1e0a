// Package conformance is the suite every store passes (as hashicorp/raft's
// LogStore tests do for its stores): the file-system store and the NATS
// JetStream store, the latter on an embedded nats-server started by the
// test (JetStream on, store in a temp dir, random loopback port). It
// tests the narrow interface (run.Backend, this file) and the operations
// on top of it (run.Run on a root of each store, run_test.go): every
// SPEC §3 transition, cursors, delivery status, the mail tree, the race
// where many respond at once, waiting and wake-up, bad input. Racing and
// concurrent writers are real processes: this test binary started again
// in a helper mode.
package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store/natsstore"
)

const helperEnv = "CREW_CONFORMANCE_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(helper(h))
	}
	os.Exit(m.Run())
}

// open returns the root and the backend a store address names:
// "file:DIR" (a state root) or "nats:URL".
func open(ctx context.Context, addr string) (*run.Root, run.Backend, func(), error) {
	kind, where, _ := strings.Cut(addr, ":")
	switch kind {
	case "file":
		root, err := run.Find(where, crew.PrivatePerm)
		if err != nil {
			return nil, nil, nil, err
		}
		return root, run.FileBackend{Root: root}, func() {}, nil
	case "nats":
		s, err := natsstore.Dial(ctx, where, natsstore.Options{})
		if err != nil {
			return nil, nil, nil, err
		}
		return run.RemoteRoot(s), s, func() { s.Close() }, nil
	}
	return nil, nil, nil, fmt.Errorf("unknown store %q", addr)
}

// store is one store under test, as a backend and as a root, and the
// address helper processes reach it at.
type store struct {
	name string
	addr string
	b    run.Backend
	root *run.Root
}

// stores starts every backend, fresh, for one test.
func stores(t *testing.T) []store {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := run.Init(dir, crew.PrivatePerm); err != nil {
		t.Fatal(err)
	}
	srv := natstest.Server(t)
	var out []store
	for _, s := range []store{{name: "file", addr: "file:" + dir}, {name: "nats", addr: "nats:" + srv.ClientURL()}} {
		root, b, closer, err := open(ctx, s.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closer)
		s.b, s.root = b, root
		out = append(out, s)
	}
	return out
}

// each runs f against every backend as a subtest.
func each(t *testing.T, f func(t *testing.T, s store)) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) { f(t, s) })
	}
}

func created(id string) *events.Event {
	now := events.Now()
	data, _ := json.Marshal(state.Manifest{ID: id, Title: "conformance", Leader: "leader", CreatedAt: now, Dir: "/"})
	return &events.Event{Seq: 1, At: now, Type: events.RunCreated, Run: id, Actor: "leader", Data: data}
}

func event(id string, seq int64, actor string) *events.Event {
	return &events.Event{Seq: seq, At: events.Now(), Type: events.MessageSent, Run: id, Task: "t1", Actor: actor,
		Message: &events.Message{ID: fmt.Sprintf("m-%s-%d", actor, seq), Seq: seq, Run: id, Task: "t1", Kind: events.KindSteer,
			Direction: events.Inbox, From: actor, To: "t1", Body: "body " + actor, Priority: "normal", Status: events.StatusPending}}
}

func readAll(t *testing.T, b run.Backend, id string, since int64) []*events.Event {
	t.Helper()
	var out []*events.Event
	if err := b.Read(context.Background(), id, since, func(e *events.Event) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("read %s since %d: %v", id, since, err)
	}
	return out
}

func seqs(evs []*events.Event) []int64 {
	return pluck(evs, func(e *events.Event) int64 { return e.Seq })
}

// pluck returns f of each of xs, in order.
func pluck[T, V any](xs []T, f func(T) V) []V {
	var out []V
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

func TestCreateRun(t *testing.T) {
	each(t, func(t *testing.T, s store) {
		ctx := context.Background()
		if err := s.b.CreateRun(ctx, created("r1")); err != nil {
			t.Fatal(err)
		}
		ids, err := s.b.Runs(ctx)
		if err != nil || len(ids) != 1 || ids[0] != "r1" {
			t.Fatalf("Runs = %v, %v; want [r1]", ids, err)
		}
		if err := s.b.CreateRun(ctx, created("R1")); !errors.Is(err, crew.ErrConflict) {
			t.Errorf("create R1 beside r1: %v; want ErrConflict (ids differing only in case)", err)
		}
		if err := s.b.CreateRun(ctx, created("r1")); !errors.Is(err, crew.ErrConflict) {
			t.Errorf("create r1 again: %v; want ErrConflict", err)
		}
		for _, bad := range []string{"a/b", "..", "a.b", ""} {
			if err := s.b.CreateRun(ctx, created(bad)); !errors.Is(err, crew.ErrInvalid) {
				t.Errorf("create %q: %v; want ErrInvalid", bad, err)
			}
		}
		evs := readAll(t, s.b, "r1", 0)
		if len(evs) != 1 || evs[0].Type != events.RunCreated || evs[0].Seq != 1 {
			t.Fatalf("log of a new run = %+v; want run.created at seq 1", evs)
		}
		var m state.Manifest
		if err := json.Unmarshal(evs[0].Data, &m); err != nil || m.ID != "r1" || m.Leader != "leader" {
			t.Errorf("manifest in run.created = %+v, %v", m, err)
		}
		if h, err := s.b.Head(ctx, "r1"); h != 1 || err != nil {
			t.Errorf("Head = %d, %v; want 1", h, err)
		}
		err = s.b.Read(ctx, "nope", 0, func(*events.Event) error { return nil })
		if !errors.Is(err, crew.ErrNotFound) {
			t.Errorf("read unknown run: %v; want ErrNotFound", err)
		}
		if err := s.b.Append(ctx, event("nope", 2, "x"), "op"); !errors.Is(err, crew.ErrNotFound) {
			t.Errorf("append to unknown run: %v; want ErrNotFound", err)
		}
	})
}

func TestAppendKeepsSeqDense(t *testing.T) {
	each(t, func(t *testing.T, s store) {
		ctx := context.Background()
		if err := s.b.CreateRun(ctx, created("r1")); err != nil {
			t.Fatal(err)
		}
		for seq := int64(2); seq <= 10; seq++ {
			if err := s.b.Append(ctx, event("r1", seq, "a"), fmt.Sprint("op-", seq)); err != nil {
				t.Fatalf("append seq %d: %v", seq, err)
			}
		}
		for _, seq := range []int64{12, 10, 5, 1} {
			if err := s.b.Append(ctx, event("r1", seq, "b"), fmt.Sprint("bad-", seq)); !errors.Is(err, crew.ErrConflict) {
				t.Errorf("append seq %d after seq 10: %v; want ErrConflict", seq, err)
			}
		}
		if err := s.b.Append(ctx, event("r1", 0, "b"), "zero"); !errors.Is(err, crew.ErrInvalid) {
			t.Errorf("append seq 0: %v; want ErrInvalid", err)
		}
		got := seqs(readAll(t, s.b, "r1", 0))
		if fmt.Sprint(got) != "[1 2 3 4 5 6 7 8 9 10]" {
			t.Fatalf("seqs = %v; want 1..10, nothing of the refused appends", got)
		}
		for _, e := range readAll(t, s.b, "r1", 1) {
			if e.Actor != "a" || e.Message == nil || e.Message.Body != "body a" {
				t.Errorf("seq %d = %+v; want writer a's event", e.Seq, e)
			}
		}
		// Cursors.
		if got := seqs(readAll(t, s.b, "r1", 7)); fmt.Sprint(got) != "[8 9 10]" {
			t.Errorf("since 7 = %v; want [8 9 10]", got)
		}
		if got := readAll(t, s.b, "r1", 10); len(got) != 0 {
			t.Errorf("since 10 = %v; want nothing", seqs(got))
		}
		if got := readAll(t, s.b, "r1", 99); len(got) != 0 {
			t.Errorf("since 99 = %v; want nothing", seqs(got))
		}
		// A reader that stops early.
		n := 0
		stop := errors.New("stop")
		err := s.b.Read(ctx, "r1", 0, func(*events.Event) error {
			if n++; n == 3 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != 3 {
			t.Errorf("Read with fn failing at the 3rd event: %v after %d; want stop after 3", err, n)
		}
	})
}

// A retried append (same operation id, same seq: its acknowledgement was
// lost) is stored once.
func TestRetriedAppendStoredOnce(t *testing.T) {
	each(t, func(t *testing.T, s store) {
		ctx := context.Background()
		if err := s.b.CreateRun(ctx, created("r1")); err != nil {
			t.Fatal(err)
		}
		ev := event("r1", 2, "a")
		if err := s.b.Append(ctx, ev, "op-retried"); err != nil {
			t.Fatal(err)
		}
		// NATS answers a duplicate with the first acknowledgement (nil);
		// the file store, which cannot lose one, finds seq 2 taken.
		if err := s.b.Append(ctx, ev, "op-retried"); err != nil && !errors.Is(err, crew.ErrConflict) {
			t.Fatalf("retried append: %v", err)
		}
		if got := seqs(readAll(t, s.b, "r1", 0)); fmt.Sprint(got) != "[1 2]" {
			t.Fatalf("seqs = %v; want [1 2]: the retry stored once", got)
		}
		if err := s.b.Append(ctx, event("r1", 3, "a"), "op-next"); err != nil {
			t.Fatalf("append after the retry: %v", err)
		}
	})
}

// Many processes append the same seq at once: exactly one wins, the
// others get ErrConflict, and the log holds the winner's event.
func TestRaceExactlyOneWins(t *testing.T) {
	each(t, func(t *testing.T, s store) {
		ctx := context.Background()
		if err := s.b.CreateRun(ctx, created("r1")); err != nil {
			t.Fatal(err)
		}
		const n = 6
		outs := race(t, s, n, "race", "w")
		won := 0
		var winner string
		for i, out := range outs {
			switch strings.TrimSpace(out) {
			case "won":
				won++
				winner = fmt.Sprint("w", i)
			case "lost":
			default:
				t.Errorf("writer %d: %q", i, out)
			}
		}
		if won != 1 {
			t.Fatalf("%d writers won seq 2; want exactly 1", won)
		}
		evs := readAll(t, s.b, "r1", 0)
		if len(evs) != 2 || evs[1].Actor != winner {
			t.Fatalf("log = %v; want seq 2 by %s", seqs(evs), winner)
		}
	})
}

// Writers in several processes append with the commit rule (read the
// head, append head+1, on conflict read again): nothing is lost or
// duplicated, seq stays dense, and each writer's own order is kept.
func TestConcurrentWritersDense(t *testing.T) {
	each(t, func(t *testing.T, s store) {
		ctx := context.Background()
		if err := s.b.CreateRun(ctx, created("r1")); err != nil {
			t.Fatal(err)
		}
		const writers, each = 3, 15
		outs := race(t, s, writers, "append", "w", fmt.Sprint(each))
		for i, out := range outs {
			if strings.TrimSpace(out) != "ok" {
				t.Errorf("writer %d: %q", i, out)
			}
		}
		evs := readAll(t, s.b, "r1", 0)
		if len(evs) != 1+writers*each {
			t.Fatalf("%d events; want %d", len(evs), 1+writers*each)
		}
		next := map[string]int{}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d has seq %d: not dense", i, e.Seq)
			}
			if i == 0 {
				continue
			}
			k := next[e.Actor]
			if want := fmt.Sprintf("%s-%d", e.Actor, k); e.Reason != want {
				t.Fatalf("seq %d by %s is %q; want %q (each writer's order kept, none lost or twice)", e.Seq, e.Actor, e.Reason, want)
			}
			next[e.Actor] = k + 1
		}
	})
}

// A waiter blocks until the log grows past its cursor, and is woken
// when another process appends.
func TestWatchWakes(t *testing.T) {
	each(t, func(t *testing.T, s store) {
		ctx := context.Background()
		if err := s.b.CreateRun(ctx, created("r1")); err != nil {
			t.Fatal(err)
		}
		// Past the cursor already: at once.
		w, err := s.b.Watch(ctx, "r1", 0)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := w.Wait(wctx); err != nil {
			t.Errorf("watch after seq 0 of a log at seq 1: %v; want an immediate wake", err)
		}
		cancel()
		w.Close()

		w, err = s.b.Watch(ctx, "r1", 1)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		woke := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			for {
				if err := w.Wait(wctx); err != nil {
					woke <- err
					return
				}
				// A wake-up is a hint: only growth past the cursor counts.
				if h, _ := s.b.Head(ctx, "r1"); h > 1 {
					woke <- nil
					return
				}
			}
		}()
		select {
		case err := <-woke:
			t.Fatalf("woke (%v) before anything was appended", err)
		case <-time.After(300 * time.Millisecond):
		}
		out := spawn(t, 1, func(int) string {
			return strings.Join([]string{"append", s.addr, "r1", "", "other", "1"}, "|")
		}, nil)
		if strings.TrimSpace(out[0]) != "ok" {
			t.Fatalf("appending process: %q", out[0])
		}
		if err := <-woke; err != nil {
			t.Fatalf("waiter was not woken by another process's append: %v", err)
		}
	})
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
func race(t *testing.T, s store, n int, mode, prefix string, args ...string) []string {
	t.Helper()
	barrier := filepath.Join(t.TempDir(), "go")
	return spawn(t, n, func(i int) string {
		return strings.Join(append([]string{mode, s.addr, "r1", barrier, fmt.Sprint(prefix, i)}, args...), "|")
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

// helper is a writer process: "race|STORE|RUN|BARRIER|NAME" appends seq
// head+1 once and prints won or lost; "append|STORE|RUN|BARRIER|NAME|N"
// appends N events with the commit rule and prints ok. Modes of the
// operation-level tests are runHelper's.
func helper(spec string) int {
	f := strings.Split(spec, "|")
	mode, addr, id, barrier, name := f[0], f[1], f[2], f[3], f[4]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root, b, closer, err := open(ctx, addr)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer closer()
	if code, ok := runHelper(ctx, mode, root, id, barrier, name, f[5:]); ok {
		return code
	}
	head, err := b.Head(ctx, id)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	awaitBarrier(barrier)
	switch mode {
	case "race":
		return outcome(b.Append(ctx, event(id, head+1, name), "race-"+name))
	case "append":
		n, _ := strconv.Atoi(f[5])
		for k := range n {
			for {
				ev := event(id, head+1, name)
				ev.Reason = fmt.Sprintf("%s-%d", name, k)
				err := b.Append(ctx, ev, fmt.Sprintf("%s-%d-%d", name, k, head+1))
				if err == nil {
					head++
					break
				}
				if !errors.Is(err, crew.ErrConflict) {
					fmt.Println(err)
					return 1
				}
				if head, err = b.Head(ctx, id); err != nil {
					fmt.Println(err)
					return 1
				}
			}
		}
		fmt.Println("ok")
	}
	return 0
}
