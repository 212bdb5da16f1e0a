//go:build linux

package supervise

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/crew-dev/crew/internal/proc"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// recordWorker records, for task t1 (started), a worker.started naming
// the process w and a crew spawn that is gone: an exited process's pid.
func recordWorker(t *testing.T, r *run.Run, w proc.ID) {
	t.Helper()
	ctx := context.Background()
	_, err := r.AddTask(ctx, "t1", state.TaskSpec{}, run.Leader)
	must(t, err)
	_, err = r.Transition(ctx, "t1", task.Start, "t1", "", nil)
	must(t, err)
	dead := exec.Command("true")
	must(t, dead.Run())
	host, _ := os.Hostname()
	rec := &state.Worker{Attempt: 1, PID: w.PID, Start: w.Start, Boot: w.Boot, Host: host, Command: []string{"sleep", "60"},
		Supervisor: dead.Process.Pid, SupervisorStart: 1}
	must(t, r.WorkerStarted(ctx, "t1", rec))
}

// liveProcess starts a process that runs until the test ends.
func liveProcess(t *testing.T) proc.ID {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	id := proc.Of(cmd.Process.Pid)
	if id.Start == 0 {
		t.Fatalf("no start time for pid %d", id.PID)
	}
	return id
}

// A pid that now belongs to another process (same pid, another start
// time: the kernel reused it) is not taken for the worker: the worker is
// found gone, its exit recorded as unknown, and its task failed.
func TestReapNeverMistakesAReusedPid(t *testing.T) {
	r := newTestRun(t)
	other := liveProcess(t)
	reused := other
	reused.Start-- // the worker that had this pid started earlier
	recordWorker(t, r, reused)
	st, err := r.TaskState()
	must(t, err)
	if l := Liveness(r, st, 0, st.Tasks["t1"].CreatedAt.Time)["t1"]; l == nil || l.State != run.LiveDead {
		t.Fatalf("liveness = %+v, want dead", l)
	}
	n, err := Reap(context.Background(), r, st)
	must(t, err)
	st, err = r.TaskState()
	must(t, err)
	tk := st.Tasks["t1"]
	if n != 1 || tk.Status != task.Failed || !strings.Contains(tk.Reason, "is gone") {
		t.Fatalf("reaped %d; task %s, reason %q; want 1, failed, gone", n, tk.Status, tk.Reason)
	}
	if x := tk.Workers[0].Exit; x == nil || !x.Unknown || x.PID != other.PID {
		t.Fatalf("exit = %+v, want unknown for pid %d", x, other.PID)
	}
}

// The same pid with the same start time is the worker itself: alive,
// and nothing is recorded.
func TestReapLeavesALiveWorker(t *testing.T) {
	r := newTestRun(t)
	recordWorker(t, r, liveProcess(t))
	st, err := r.TaskState()
	must(t, err)
	n, err := Reap(context.Background(), r, st)
	must(t, err)
	st, err = r.TaskState()
	must(t, err)
	if n != 0 || st.Tasks["t1"].Status != task.Running || st.Tasks["t1"].Live() == nil {
		t.Fatalf("reaped %d, task %+v; want a running task with its worker", n, st.Tasks["t1"])
	}
}
