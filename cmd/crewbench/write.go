package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// rawLine is the raw limit's record: 300 bytes with its '\n', about the
// size of a crew event with a short body.
var rawLine = append(bytes.Repeat([]byte("x"), 299), '\n')

// raw measures the physical limit of the disk for d: lock a file lock,
// append rawLine to a file, fsync(2) it, unlock, repeated. It returns
// appends per second.
func raw(dir string, d time.Duration) (float64, error) {
	f, err := os.OpenFile(filepath.Join(dir, "raw.log"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	lk := flock.New(filepath.Join(dir, "raw.lock"))
	defer lk.Close()
	return rate(func(int) error {
		if err := lk.Lock(); err != nil {
			return err
		}
		if _, err := f.Write(rawLine); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		return lk.Unlock()
	})(d)
}

// rate returns a driver that calls op (with 1, 2, 3 … across calls of the
// driver) for a duration, one call after another, and returns calls per
// second.
func rate(op func(i int) error) func(time.Duration) (float64, error) {
	i := 0
	return func(d time.Duration) (float64, error) {
		n := 0
		start := time.Now()
		for time.Since(start) < d {
			i++
			if err := op(i); err != nil {
				return 0, err
			}
			n++
		}
		return float64(n) / time.Since(start).Seconds(), nil
	}
}

// rawCreate measures, for d, how many new 600-byte files (about a
// mail-tree copy of a message) the file system of dir creates and writes
// per second, without fsync: the ceiling of any sustained message rate,
// since docs/mail-tree.md gives every message a file of its own. The files are
// kept (deleting them would slow later file creation on ext4 without a
// journal, which does not reuse freed inodes at once).
func rawCreate(dir string, d time.Duration) (float64, error) {
	sub, err := os.MkdirTemp(dir, "create-")
	if err != nil {
		return 0, err
	}
	data := bytes.Repeat([]byte("x"), 600)
	return rate(func(i int) error {
		return os.WriteFile(filepath.Join(sub, fmt.Sprintf("m%07d.json", i)), data, 0o600)
	})(d)
}

// rawSend is the least any program does for send_ratio's workload on
// this disk: one writer that, per message, takes a file lock, appends
// rawLine to a log and fsyncs it, creates a 600-byte file (the mail-tree
// copy, docs/mail-tree.md) and appends rawLine to a second file (the
// mailbox line), then unlocks; no encoding, no validation, no state.
func rawSend(dir string) (func(time.Duration) (float64, error), error) {
	sub, err := os.MkdirTemp(dir, "rawsend-")
	if err != nil {
		return nil, err
	}
	log, err := os.OpenFile(filepath.Join(sub, "log"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	box, err := os.OpenFile(filepath.Join(sub, "box"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	lk := flock.New(filepath.Join(sub, "lock"))
	data := bytes.Repeat([]byte("x"), 600)
	return rate(func(i int) error {
		if err := lk.Lock(); err != nil {
			return err
		}
		if _, err := log.Write(rawLine); err != nil {
			return err
		}
		if err := log.Sync(); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("m%07d.json", i)), data, 0o600); err != nil {
			return err
		}
		if _, err := box.Write(rawLine); err != nil {
			return err
		}
		return lk.Unlock()
	}), nil
}

// rawGroup measures, for d, the least any program does for group_ratio's
// workload on this disk and these processors: 16 goroutines, each
// appending rawLine and creating a 600-byte file per message (docs/mail-tree.md: the
// mail-tree copy), the lines group-committed (whoever finds no commit
// running writes every queued line in one write(2) and one fsync(2);
// the others wait for it), nothing else: no encoding, no validation, no
// state. It returns messages per second.
func rawGroup(dir string, d time.Duration) (float64, error) {
	f, err := os.OpenFile(filepath.Join(dir, "rawgroup.log"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var (
		mu      sync.Mutex
		queue   []chan error
		leading bool
	)
	commit := func() error {
		done := make(chan error, 1)
		mu.Lock()
		queue = append(queue, done)
		if leading {
			mu.Unlock()
			return <-done
		}
		leading = true
		for len(queue) > 0 {
			batch := queue
			queue = nil
			mu.Unlock()
			_, err := f.Write(bytes.Repeat(rawLine, len(batch)))
			if err == nil {
				err = f.Sync()
			}
			for _, c := range batch {
				c <- err
			}
			mu.Lock()
		}
		leading = false
		mu.Unlock()
		return <-done
	}
	data := bytes.Repeat([]byte("x"), 600)
	var (
		n     atomic.Int64
		wg    sync.WaitGroup
		first atomic.Value
	)
	start := time.Now()
	for g := range groupWriters {
		sub, err := os.MkdirTemp(dir, "rawgroup-")
		if err != nil {
			return 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Since(start) < d; i++ {
				err := commit()
				if err == nil {
					err = os.WriteFile(filepath.Join(sub, fmt.Sprintf("%02d-%07d.json", g, i)), data, 0o600)
				}
				if err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return 0, err
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// workload prepares a run and returns a function that drives the library
// for a duration and returns operations per second.
type workload func(dir string) (func(time.Duration) (float64, error), error)

// alternate runs c.rounds rounds of the raw limit, each followed by a round
// of the workload, and returns both series.
func alternate(tmp string, c config, name string, w workload) (rawS, prod []float64, err error) {
	dir := filepath.Join(tmp, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	drive, err := w(dir)
	if err != nil {
		return nil, nil, err
	}
	// A short warm-up of both, not counted.
	if _, err := raw(dir, c.round/4); err != nil {
		return nil, nil, err
	}
	if _, err := drive(c.round / 4); err != nil {
		return nil, nil, err
	}
	for i := range c.rounds {
		r, err := raw(dir, c.round)
		if err != nil {
			return nil, nil, err
		}
		p, err := drive(c.round)
		if err != nil {
			return nil, nil, err
		}
		step("  round %d: raw %.0f/s, %s %.0f/s (%.2f)", i+1, r, name, p, p/r)
		rawS, prod = append(rawS, r), append(prod, p)
	}
	return rawS, prod, nil
}

// newRun makes a state root in dir with one run and running tasks.
func newRun(dir, id string, tasks ...string) (*run.Run, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	root, err := run.Init(dir, crew.PrivatePerm)
	if err != nil {
		return nil, err
	}
	r, err := root.Create(run.CreateOptions{ID: id, Dir: dir})
	if err != nil {
		return nil, err
	}
	// A long-lived leader's setting: an operation returns once its event
	// is durable; the projections follow (Run.SetAsync).
	r.SetAsync(true)
	ctx := context.Background()
	for _, t := range tasks {
		if _, err := r.AddTask(ctx, t, state.TaskSpec{Title: "bench task " + t}, run.Leader); err != nil {
			return nil, err
		}
		if _, err := r.Transition(ctx, t, task.Start, t, "", nil); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// body returns a message body of about n bytes that differs by i.
func body(kind string, i int, n int) string {
	s := fmt.Sprintf("%s %d: ", kind, i)
	const words = "check the failing test in store_test.go before touching the parser; keep the public API as it is. "
	for len(s) < n {
		s += words
	}
	return s[:n]
}

// sendOne is one goroutine sending, in turn, a steer, a question and the
// response to it: each call one durable commit.
func sendOne(dir string) (func(time.Duration) (float64, error), error) {
	return sendOneRun(dir, true)
}

// sendOneSync is sendOne with a synchronous Run: each call returns only
// once its projections are written too.
func sendOneSync(dir string) (func(time.Duration) (float64, error), error) {
	return sendOneRun(dir, false)
}

func sendOneRun(dir string, async bool) (func(time.Duration) (float64, error), error) {
	r, err := newRun(dir, "send", "s1")
	if err != nil {
		return nil, err
	}
	r.SetAsync(async)
	ctx := context.Background()
	i := 0
	return func(d time.Duration) (float64, error) {
		n := 0
		start := time.Now()
		for time.Since(start) < d {
			i++
			if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "s1", From: run.Leader, Body: body("steer", i, 120)}); err != nil {
				return 0, err
			}
			if _, _, err := r.Ask(ctx, run.SendOptions{Task: "s1", From: "s1", Body: body("question", i, 120)}, false); err != nil {
				return 0, err
			}
			if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindResponse, Task: "s1", From: run.Leader, Body: body("response", i, 120)}); err != nil {
				return 0, err
			}
			n += 3
		}
		r.Sync() // sustained: the round ends when its projections are written too
		return float64(n) / time.Since(start).Seconds(), nil
	}, nil
}

// groupWriters is how many goroutines send at once in group_ratio.
const groupWriters = 16

// sendGroup is 16 goroutines, each steering its own task, through one
// Run: group commit.
func sendGroup(dir string) (func(time.Duration) (float64, error), error) {
	var tasks []string
	for i := range groupWriters {
		tasks = append(tasks, fmt.Sprintf("g%d", i+1))
	}
	r, err := newRun(dir, "group", tasks...)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	var seq atomic.Int64
	return func(d time.Duration) (float64, error) {
		var (
			n     atomic.Int64
			wg    sync.WaitGroup
			first error
			once  sync.Once
		)
		start := time.Now()
		for _, t := range tasks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Since(start) < d {
					i := int(seq.Add(1))
					if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: t, From: run.Leader, Body: body("steer", i, 120)}); err != nil {
						once.Do(func() { first = err })
						return
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		r.Sync() // sustained: the round ends when its projections are written too
		return float64(n.Load()) / time.Since(start).Seconds(), first
	}, nil
}
