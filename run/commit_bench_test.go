package run_test

import (
	"context"
	"testing"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// benchRun makes a run on the file store, kept as crew's command line
// keeps it (FindKept), with task t1 running.
func benchRun(b *testing.B) *run.Run {
	b.Helper()
	dir := b.TempDir()
	if _, err := run.Init(dir, crew.PrivatePerm); err != nil {
		b.Fatal(err)
	}
	root, err := run.FindKept(dir, crew.PrivatePerm)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { root.Close() })
	r, err := root.Create(run.CreateOptions{ID: "r1", Leader: "leader", Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := r.AddTask(ctx, "t1", state.TaskSpec{}, "leader"); err != nil {
		b.Fatal(err)
	}
	if _, err := r.Transition(ctx, "t1", task.Start, "t1", "", nil); err != nil {
		b.Fatal(err)
	}
	return r
}

// A steer through the library: one commit (validate, append, fsync)
// and its projections, one after another.
func BenchmarkSteer(b *testing.B) {
	r := benchRun(b)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: "use the new API"}); err != nil {
			b.Fatal(err)
		}
	}
}

// A steer, then the worker reads its inbox: the read commits
// message.delivered against the state it read (store.Change.State, a
// view), not every open message.
func BenchmarkSteerAndRead(b *testing.B) {
	r := benchRun(b)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: "use the new API"}); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Inbox(ctx, "t1", run.InboxOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
