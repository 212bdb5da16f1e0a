package guarantee

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	crewpkg "github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	natsstore "github.com/crew-dev/crew/store/nats"
	"github.com/crew-dev/crew/task"
)

// herdWaiters is how many workers the herd tests block in crew ask
// --wait: CREW_HERD_WAITERS, else 200 (make bench's herd part runs
// 1,000, and checks the same).
func herdWaiters() int {
	if n, err := strconv.Atoi(os.Getenv("CREW_HERD_WAITERS")); err == nil && n > 0 {
		return n
	}
	return 200
}

// TestManyWaitersOwnAnswer: a few hundred workers, each a crew ask --wait
// process blocked in its own task of one run, are answered in a random
// order, by several goroutines at once; each prints its own answer,
// exactly once, and exits 0. A commit wakes only the waiters it concerns
// (state.Concerns), so this checks that no waiter misses its wake-up and
// none takes another's answer.
func TestManyWaitersOwnAnswer(t *testing.T) {
	dir := newRoot(t)
	root, err := run.Find(dir, crewpkg.PrivatePerm)
	if err != nil {
		t.Fatal(err)
	}
	r, err := root.Create(run.CreateOptions{ID: "herd", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	manyWaiters(t, r, dir, nil, herdWaiters())
}

// TestManyWaitersOwnAnswerNATS: the same on a NATS server.
func TestManyWaitersOwnAnswerNATS(t *testing.T) {
	srv := natstest.Server(t)
	s, err := natsstore.Dial(context.Background(), srv.ClientURL(), natsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := run.NewRoot(s).Create(run.CreateOptions{ID: "herd"})
	if err != nil {
		t.Fatal(err)
	}
	manyWaiters(t, r, t.TempDir(), []string{"CREW_STORE=" + srv.ClientURL()}, herdWaiters())
}

func manyWaiters(t *testing.T, r *run.Run, dir string, env []string, n int) {
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("w%04d", i)
		if _, err := r.AddTask(ctx, ids[i], state.TaskSpec{Title: "waiter " + ids[i]}, run.Leader); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Transition(ctx, ids[i], task.Start, ids[i], "", nil); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(id string) string { return "the answer for " + id + " alone" }
	type waiter struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
	}
	ws := make([]*waiter, n)
	for i, id := range ids {
		w := &waiter{cmd: exec.Command(crewBin, "ask", "--wait", "question of "+id)}
		w.cmd.Dir = dir
		w.cmd.Env = crewEnv(append(env, "CREW_RUN=herd", "CREW_TASK="+id)...)
		w.cmd.Stdout, w.cmd.Stderr = &w.stdout, &w.stderr
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	defer func() {
		for _, w := range ws {
			w.cmd.Process.Kill()
		}
	}()
	// Every worker waits before any is answered.
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	watch := r.Watch(state.Leader)
	defer watch.Close()
	for {
		st, err := r.TaskState()
		if err != nil {
			t.Fatal(err)
		}
		waiting := 0
		for _, id := range ids {
			if st.Tasks[id].Status == task.Waiting {
				waiting++
			}
		}
		if waiting == n {
			break
		}
		if err := watch.Wait(wctx); err != nil {
			t.Fatalf("%d of %d workers waiting after 3 minutes", waiting, n)
		}
	}
	order := rand.Perm(n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := g; k < n; k += 4 {
				id := ids[order[k]]
				if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindResponse, Task: id, From: run.Leader, Body: answer(id)}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, w := range ws {
		done := make(chan error, 1)
		go func() { done <- w.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: crew ask --wait: %v: %s", ids[i], err, w.stderr.Bytes())
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: crew ask --wait still waits a minute after its answer", ids[i])
		}
		out := w.stdout.String()
		if k := strings.Count(out, answer(ids[i])); k != 1 {
			t.Errorf("%s printed its answer %d times: %q", ids[i], k, out)
		}
		if k := strings.Count(out, "the answer for "); k != 1 {
			t.Errorf("%s printed %d answers: %q", ids[i], k, out)
		}
	}
	ws = nil
}

// TestCrashedWaiterFIFOTidied: a crew ask --wait process killed with
// SIGKILL leaves its wake-up FIFO under wake/<task>/ (it could not remove
// its name). No poke has to come for it to go: the next waiter for the
// same task removes it, and so does crew repair, which says so.
func TestCrashedWaiterFIFOTidied(t *testing.T) {
	dir := newRun(t, "r", "t1")
	env := []string{"CREW_RUN=r", "CREW_TASK=t1"}
	if res := runCrewIn(t, dir, nil, env, "task", "start", "t1"); res.Code != 0 {
		t.Fatalf("task start: %+v", res)
	}
	wake := filepath.Join(runDir(dir, "r"), "wake", "t1")
	// kill starts cmd, waits until it has a name under wake/t1/ that
	// was not there before, kills it and returns the name.
	kill := func(args ...string) string {
		t.Helper()
		before, _ := os.ReadDir(wake)
		cmd := exec.Command(crewBin, args...)
		cmd.Dir, cmd.Env = dir, crewEnv(env...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer cmd.Process.Kill()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			ents, _ := os.ReadDir(wake)
			for _, e := range ents {
				if !slices.ContainsFunc(before, func(b os.DirEntry) bool { return b.Name() == e.Name() }) {
					cmd.Process.Signal(syscall.SIGKILL)
					cmd.Wait()
					return filepath.Join(wake, e.Name())
				}
			}
		}
		t.Fatalf("crew %v made no wake-up FIFO under %s", args, wake)
		return ""
	}
	stale := kill("ask", "--wait", "the first question")
	if _, err := os.Lstat(stale); err != nil {
		t.Fatalf("the killed waiter's FIFO is gone before anyone tidied: %v", err)
	}
	// The next waiter for t1 (the same question, awaited again) tidies it.
	other := kill("inbox", "--follow")
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Fatalf("the next waiter for t1 left the killed waiter's FIFO %s (%v)", stale, err)
	}
	// crew repair tidies what the last killed waiter left.
	var rep struct {
		WakeRemoved int `json:"wakeRemoved"`
	}
	if err := json.Unmarshal([]byte(crew(t, dir, "repair", "r", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(other); !os.IsNotExist(err) || rep.WakeRemoved != 1 {
		t.Fatalf("crew repair: wakeRemoved %d, FIFO %s still there: %v", rep.WakeRemoved, other, err)
	}
}
