package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
)

// largeTasks is how many tasks (and goroutines) the large run has.
const largeTasks = 32

type large struct {
	run       *run.Run
	env       []string // environment of a crew process in the run
	events    int64    // events in the log
	took      time.Duration
	perS      float64
	tailTask  string // a task whose last 10 messages come after tailSince
	tailSince int64
}

// largeRun generates a run of about c.events events through the library,
// with group commit (one goroutine per task), as a mix that resembles real
// use. Each task loops through a conversation of ten operations, each one
// event:
//
//	worker asks a question; the leader reads it (message.delivered) and
//	responds; the leader steers; the worker reads the response, the steer
//	and the last follow-up, and acknowledges them; the worker reports; the
//	leader reads the report and acknowledges it; the leader queues a
//	follow-up.
//
// Half the events carry a message, and almost every message ends
// acknowledged, as in a run that is being worked. Then the leader sends
// ten steers to one task: the messages tail_read_ms reads.
func largeRun(tmp string, c config) (*large, error) {
	dir := filepath.Join(tmp, "large")
	tasks := taskIDs("t%02d", largeTasks)
	r, err := newRun(dir, "large", tasks...)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	took, done, err := fill(r, tasks, int64(c.events)-10)
	if err != nil {
		return nil, err
	}
	l := &large{run: r, env: crewEnv(filepath.Join(dir, ".crew"), "large"), took: took, tailTask: tasks[0]}
	for i := range 10 {
		m, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: l.tailTask, From: run.Leader, Body: body("steer", i, 150)})
		if err != nil {
			return nil, err
		}
		if i == 0 {
			l.tailSince = m.Seq - 1
		}
	}
	r.Sync() // measure a run at rest: every projection written
	st, err := r.TaskState()
	if err != nil {
		return nil, err
	}
	l.events = st.Seq
	l.perS = float64(done) / took.Seconds()
	return l, nil
}

// taskIDs returns n task ids made with format from 1 … n.
func taskIDs(format string, n int) []string {
	var tasks []string
	for i := range n {
		tasks = append(tasks, fmt.Sprintf(format, i+1))
	}
	return tasks
}

// fill runs the conversation of each task (converse) in a goroutine per
// task, with group commit, until r's log holds about total events. It
// returns how long that took and how many events it added.
func fill(r *run.Run, tasks []string, total int64) (time.Duration, int64, error) {
	ctx := context.Background()
	st, err := r.TaskState()
	if err != nil {
		return 0, 0, err
	}
	var budget atomic.Int64
	budget.Store(total - st.Seq)
	var done atomic.Int64
	next := func() bool {
		if budget.Add(-1) < 0 {
			return false
		}
		if n := done.Add(1); n%100_000 == 0 {
			step("  %d events", n+st.Seq)
		}
		return true
	}
	start := time.Now()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for _, t := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := converse(ctx, r, t, next); err != nil {
				once.Do(func() { first = fmt.Errorf("task %s: %w", t, err) })
				budget.Store(0)
			}
		}()
	}
	wg.Wait()
	return time.Since(start), done.Load(), first
}

// converse runs the ten-operation conversation of one task until next
// says the budget of events is spent.
func converse(ctx context.Context, r *run.Run, t string, next func() bool) error {
	var followUp string
	for i := 0; ; i++ {
		if !next() {
			return nil
		}
		q, _, err := r.Ask(ctx, run.SendOptions{Task: t, From: t, Body: body("question", i, 150)}, false)
		if err != nil {
			return err
		}
		if !next() {
			return nil
		}
		if _, err := r.MarkDelivered(ctx, run.Leader, []string{q.ID}); err != nil {
			return err
		}
		if !next() {
			return nil
		}
		resp, err := r.Send(ctx, run.SendOptions{Kind: events.KindResponse, Task: t, From: run.Leader, Body: body("response", i, 200)})
		if err != nil {
			return err
		}
		if !next() {
			return nil
		}
		steer, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: t, From: run.Leader, Body: body("steer", i, 120)})
		if err != nil {
			return err
		}
		ids := []string{resp.ID, steer.ID}
		if followUp != "" {
			ids = append(ids, followUp)
		}
		if !next() {
			return nil
		}
		if _, err := r.MarkDelivered(ctx, t, ids); err != nil {
			return err
		}
		if !next() {
			return nil
		}
		if err := r.Acknowledge(ctx, t, ids, false, ""); err != nil {
			return err
		}
		if !next() {
			return nil
		}
		rep, err := r.Send(ctx, run.SendOptions{Kind: events.KindReport, Task: t, From: t, Body: body("report", i, 300)})
		if err != nil {
			return err
		}
		if !next() {
			return nil
		}
		if _, err := r.MarkDelivered(ctx, run.Leader, []string{rep.ID}); err != nil {
			return err
		}
		if !next() {
			return nil
		}
		if err := r.Acknowledge(ctx, run.Leader, []string{rep.ID}, false, ""); err != nil {
			return err
		}
		if !next() {
			return nil
		}
		fu, err := r.Send(ctx, run.SendOptions{Kind: events.KindFollowUp, Task: t, From: run.Leader, Body: body("follow-up", i, 150)})
		if err != nil {
			return err
		}
		followUp = fu.ID
	}
}

// parallel calls fn(0) … fn(total-1) from n goroutines and returns the
// first error.
func parallel(n, total int, fn func(i int) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(total))
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
