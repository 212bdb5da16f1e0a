package run_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// A leader sets up a run, a worker asks and blocks until the leader
// responds: what crew ask --wait and crew respond do, through the library.
func Example() {
	dir, err := os.MkdirTemp("", "crew-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	root, err := run.Init(dir, crew.PrivatePerm) // or run.Find, like git finds .git
	if err != nil {
		log.Fatal(err)
	}
	defer root.Close() // before the process ends: the last snapshots may still be being written
	r, err := root.Create(run.CreateOptions{ID: "r1", Title: "fix Reverse"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := r.AddTask(ctx, "t1", state.TaskSpec{Title: "make Reverse keep runes whole"}, run.Leader); err != nil {
		log.Fatal(err)
	}

	// The worker: start the task, ask, and wait for the answer.
	answer := make(chan string)
	go func() {
		if _, err := r.Transition(ctx, "t1", task.Start, "t1", "", nil); err != nil {
			log.Fatal(err)
		}
		_, resp, err := r.Ask(ctx, run.SendOptions{Task: "t1", From: "t1", Body: "Fix Reverse, or skip the test?"}, true)
		if err != nil {
			log.Fatal(err)
		}
		answer <- resp.Body
	}()

	// The leader: wait for the open question (woken by the log growing,
	// not by polling), then respond to it.
	w := r.Watch()
	defer w.Close()
	for {
		p, err := r.Pending(run.Leader)
		if err != nil {
			log.Fatal(err)
		}
		if len(p.Messages) > 0 && p.Messages[0].Kind == events.KindQuestion {
			break
		}
		if err := w.Wait(ctx); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindResponse, Task: "t1", From: run.Leader, Body: "Fix Reverse."}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-answer)
	// Output: Fix Reverse.
}
