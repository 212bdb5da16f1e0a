package run

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

func doneRun(t *testing.T, doneWhen string) (*Run, context.Context) {
	t.Helper()
	dir := t.TempDir()
	root, err := Init(dir, crew.PrivatePerm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() }) // snapshots still being written, before TempDir goes
	r, err := root.Create(CreateOptions{ID: "r1", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := r.AddTask(ctx, "t1", state.TaskSpec{DoneWhen: doneWhen}, "leader"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Transition(ctx, "t1", task.Start, "t1", "", nil); err != nil {
		t.Fatal(err)
	}
	return r, ctx
}

// Only the tail of a noisy check is kept, cut at a character boundary.
func TestVerifyKeepsTheTail(t *testing.T) {
	r, ctx := doneRun(t, `printf 'é%.0s' $(seq 1 5000); echo; echo THE-END; exit 2`)
	c, err := r.Verify(ctx, "t1", 0)
	if !errors.Is(err, crew.ErrConflict) || c.ExitCode != 2 {
		t.Fatalf("Verify = %+v, %v", c, err)
	}
	if len(c.Output) > CheckTail || !strings.HasSuffix(c.Output, "\nTHE-END\n") || !strings.HasPrefix(c.Output, "é") {
		t.Fatalf("output: %d bytes, starts %q, ends %q", len(c.Output), c.Output[:4], c.Output[len(c.Output)-10:])
	}
	if !strings.Contains(err.Error(), "THE-END") {
		t.Errorf("the refusal does not show the output: %v", err)
	}
}

// Complete stores the check in task.completed, where state.CheckOf finds it.
func TestCompleteRecordsTheCheck(t *testing.T) {
	r, ctx := doneRun(t, `echo "in $PWD as $CREW_RUN/$CREW_TASK"`)
	tk, c, err := r.Complete(ctx, "t1", "t1", CompleteOptions{})
	if err != nil || tk.Status != task.Completed {
		t.Fatalf("Complete = %+v, %v", tk, err)
	}
	want := "in " + r.Manifest.Dir + " as r1/t1\n"
	if c.Output != want || c.ExitCode != 0 || c.Command == "" {
		t.Fatalf("check %+v, want output %q", c, want)
	}
	cur, err := r.Events(tk.CreatedSeq + 1) // created, started, completed
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	e, err := cur.Next()
	if err != nil {
		t.Fatal(err)
	}
	got := state.CheckOf(&e)
	if e.Type != events.TaskCompleted || got == nil || got.Output != want || got.ExitCode != 0 {
		t.Fatalf("event %s holds check %+v", e.Type, got)
	}
	if state.CheckOf(&events.Event{Type: events.TaskCompleted}) != nil || state.CheckOf(&events.Event{Type: events.TaskFailed, Data: e.Data}) != nil {
		t.Error("state.CheckOf found a check where there is none")
	}
}

// Cancelling the context (Ctrl-C) stops the check and is not a conflict.
func TestVerifyInterrupted(t *testing.T) {
	r, _ := doneRun(t, `touch started; sleep 60`)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if _, err := os.Stat(filepath.Join(r.Manifest.Dir, "started")); err == nil {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	_, _, err := r.Complete(ctx, "t1", "t1", CompleteOptions{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, crew.ErrConflict) {
		t.Fatalf("Complete after cancel: %v", err)
	}
	st, _ := r.State()
	if st.Tasks["t1"].Status != task.Running {
		t.Fatalf("task is %s", st.Tasks["t1"].Status)
	}
}

// A run whose directory is gone cannot run its checks: said plainly.
func TestVerifyRunDirGone(t *testing.T) {
	r, ctx := doneRun(t, `true`)
	r.Manifest.Dir = filepath.Join(r.Manifest.Dir, "gone")
	_, err := r.Verify(ctx, "t1", 0)
	if !errors.Is(err, crew.ErrConflict) || !strings.Contains(err.Error(), "is gone") {
		t.Fatalf("Verify: %v", err)
	}
}

// A follow-up sent while the done-when check runs is seen when the
// completion is validated again under the run lock: the task is not
// completed over it (and is, with Force).
func TestCompleteRefusesAFollowUpSentDuringTheCheck(t *testing.T) {
	for _, force := range []bool{false, true} {
		r, ctx := doneRun(t, `touch started; while [ ! -f go ]; do sleep 0.01; done`)
		dir := r.Manifest.Dir
		done := make(chan error, 1)
		go func() {
			_, _, err := r.Complete(ctx, "t1", "t1", CompleteOptions{Force: force})
			done <- err
		}()
		for _, err := os.Stat(filepath.Join(dir, "started")); err != nil; _, err = os.Stat(filepath.Join(dir, "started")) {
			time.Sleep(5 * time.Millisecond)
		}
		m, err := r.Send(ctx, SendOptions{Kind: events.KindFollowUp, Task: "t1", From: "leader", Body: "and the changelog"})
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, "go"), nil, 0o600))
		err = <-done
		st, serr := r.TaskState()
		must(t, serr)
		switch {
		case force && (err != nil || st.Tasks["t1"].Status != task.Completed):
			t.Errorf("Force: Complete = %v, task %s; want completed", err, st.Tasks["t1"].Status)
		case !force && (!errors.Is(err, crew.ErrConflict) || !strings.Contains(err.Error(), m.ID) || st.Tasks["t1"].Status != task.Running):
			t.Errorf("Complete = %v, task %s; want a conflict naming follow-up %s, and the task running", err, st.Tasks["t1"].Status, m.ID)
		}
	}
}
