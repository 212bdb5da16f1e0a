//go:build linux

package supervise

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/crew-dev/crew/internal/proc"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// A worker whose task the leader cancels is stopped by Spawn, which
// watches the log: SIGTERM to its process group (the sh and its sleep),
// and, for one that ignores SIGTERM, SIGKILL after the grace; a stopped
// worker is not started again, retries or not.
func TestSpawnStopsWorkerWhenTaskEnds(t *testing.T) {
	for _, c := range []struct {
		name    string
		script  string
		signals []string
	}{
		{"SIGTERM", `touch "$1"; sleep 1000`, []string{"SIGTERM"}},
		{"SIGKILL after the grace", `trap "" TERM; touch "$1"; while :; do sleep 0.1; done`, []string{"SIGTERM", "SIGKILL"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRun(t)
			ctx := context.Background()
			_, err := r.AddTask(ctx, "t1", state.TaskSpec{}, run.Leader)
			must(t, err)
			started := make(chan *state.Worker, 1)
			type result struct {
				x   *state.WorkerExit
				err error
			}
			done := make(chan result, 1)
			// The script touches ready once its trap is set: a SIGTERM
			// before that would end it whatever the script says.
			ready := filepath.Join(t.TempDir(), "ready")
			go func() {
				x, err := Spawn(ctx, r, SpawnOptions{Task: "t1", Command: []string{"sh", "-c", c.script, "sh", ready}, Retries: 2,
					Grace: 300 * time.Millisecond, Started: func(w *state.Worker) { started <- w }})
				done <- result{x, err}
			}()
			w := <-started
			_, err = r.Transition(ctx, "t1", task.Start, "t1", "", nil)
			must(t, err)
			bound := time.After(30 * time.Second)
			for _, err := os.Stat(ready); err != nil; _, err = os.Stat(ready) {
				select {
				case res := <-done:
					t.Fatalf("the worker ended before it was ready: %+v, %v", res.x, res.err)
				case <-bound:
					t.Fatal("the worker never got ready")
				case <-time.After(5 * time.Millisecond):
				}
			}
			_, err = r.Transition(ctx, "t1", task.Cancel, run.Leader, "not needed", nil)
			must(t, err)
			var res result
			select {
			case res = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the worker was not stopped")
			}
			must(t, res.err)
			s := res.x.Stopped
			if s == nil || !s.Group || s.PID != w.PID || !slices.Equal(s.Signals, c.signals) || s.Reason != "task cancelled by leader" {
				t.Fatalf("stopped = %+v, want %v to process group %d (task cancelled by leader)", s, c.signals, w.PID)
			}
			if proc.GroupAlive(w.PID) {
				t.Fatalf("process group %d still runs", w.PID)
			}
			st, err := r.TaskState()
			must(t, err)
			if n := len(st.Tasks["t1"].Workers); n != 1 {
				t.Fatalf("%d attempts, want 1: a stopped worker is not started again", n)
			}
		})
	}
}
