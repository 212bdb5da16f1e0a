package file_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store/file"
	"github.com/crew-dev/crew/task"
)

// TestConcurrentSyncOpsSnapshotsRepair: many goroutines of one process
// send, ask and respond on one Run, one of them toggling SetAsync, others
// calling Sync and Repair, while a reader watches tasks.json. tasks.json never goes
// back to a lower seq while it is read, and once every operation returned
// and the root is closed, tasks.json is the log's last seq, the state read
// equals a fresh replay, and every mailbox file equals its rebuild.
func TestConcurrentSyncOpsSnapshotsRepair(t *testing.T) {
	r := newTestRun(t)
	ctx := context.Background()
	for g := range 8 {
		id := fmt.Sprint("t", g)
		_, err := r.AddTask(ctx, id, state.TaskSpec{}, "leader")
		must(t, err)
		_, err = r.Transition(ctx, id, task.Start, id, "", nil)
		must(t, err)
	}
	stop := make(chan struct{})
	var back atomic.Value // "" or what went wrong
	back.Store("")
	var watch sync.WaitGroup
	watch.Add(1)
	go func() { // a reader of tasks.json: its seq never goes back
		defer watch.Done()
		var hi int64
		for {
			select {
			case <-stop:
				return
			default:
			}
			snap := fl(r).ReadSnapshot()
			if snap.Seq == 0 {
				continue // read while being rewritten: readers replay the log
			}
			if snap.Seq < hi {
				back.Store(fmt.Sprintf("tasks.json went from seq %d back to %d", hi, snap.Seq))
				return
			}
			hi = snap.Seq
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task := fmt.Sprint("t", g)
			for i := range 40 {
				var err error
				switch i % 4 {
				case 0:
					_, err = r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: task, From: "leader", Body: fmt.Sprint("steer ", g, i)})
				case 1:
					_, _, err = r.Ask(ctx, run.SendOptions{Kind: events.KindQuestion, Task: task, From: task, Body: fmt.Sprint("q ", g, i)}, false)
				case 2:
					_, err = r.Send(ctx, run.SendOptions{Kind: events.KindResponse, Task: task, From: "leader", Body: fmt.Sprint("a ", g, i)})
				case 3:
					_, err = r.Send(ctx, run.SendOptions{Kind: events.KindReport, Task: task, From: task, Body: fmt.Sprint("r ", g, i)})
				}
				if err != nil {
					errs <- fmt.Errorf("goroutine %d op %d: %w", g, i, err)
					return
				}
				switch {
				case g == 0 && i%5 == 0:
					r.SetAsync(i%10 == 0)
				case g == 1 && i%3 == 0:
					r.Sync()
				case g == 2 && i%7 == 0:
					if _, err := r.Repair(ctx); err != nil {
						errs <- fmt.Errorf("repair: %w", err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	watch.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := back.Load().(string); s != "" {
		t.Error(s)
	}
	r.SetAsync(false)
	must(t, r.Root().Close())
	evs := logEvents(t, r)
	lastSeq := evs[len(evs)-1].Seq
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: not dense", i, e.Seq)
		}
	}
	if snap := fl(r).ReadSnapshot(); snap.Seq != lastSeq {
		t.Errorf("after Close, tasks.json is at seq %d, the log at %d", snap.Seq, lastSeq)
	}
	checkMailboxes(t, r, "after Close")
	st, err := r.State()
	must(t, err)
	want := stateJSON(t, st)
	must(t, os.Remove(snapshotPath(r)))
	fresh, err := reopen(t, r).State()
	must(t, err)
	if got := stateJSON(t, fresh); got != want {
		t.Errorf("state from the log alone\n%s\ndiffers from the state read with tasks.json\n%s", got, want)
	}
}

// betweenSyncOps runs rounds of synchronous operations on a new run
// with a task t1: a steer to t1, edit (a change made by hand), then a
// second steer, whose message (nil if it failed) and error check gets.
// The test stops at the first round check fails. It returns the run.
func betweenSyncOps(t *testing.T, rounds int, edit func(r *run.Run, i int), check func(r *run.Run, i int, m *events.Message, err error)) *run.Run {
	t.Helper()
	r := newTestRun(t)
	ctx := context.Background()
	_, err := r.AddTask(ctx, "t1", state.TaskSpec{}, "leader")
	must(t, err)
	for i := range rounds {
		_, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: fmt.Sprint("a ", i)})
		must(t, err)
		edit(r, i)
		m, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: fmt.Sprint("b ", i)})
		check(r, i, m, err)
		if t.Failed() {
			break
		}
	}
	return r
}

// TestMailDirRemovedBetweenSyncOps: an agent's mail directory removed by
// hand between two synchronous operations of one process (the first
// one's snapshot perhaps still being written, the run lock kept for it):
// the second operation's copy for that agent is in the mail tree.
func TestMailDirRemovedBetweenSyncOps(t *testing.T) {
	betweenSyncOps(t, 200, func(r *run.Run, i int) {
		must(t, os.RemoveAll(tree(r).Dir("t1")))
	}, func(r *run.Run, i int, m *events.Message, err error) {
		must(t, err)
		if _, err := tree(r).Find("t1", m.ID); err != nil {
			t.Errorf("round %d: the copy of %s for t1: %v", i, m.ID, err)
		}
	})
}

// TestMailboxCutBetweenSyncOps: a mailbox file that lost its last line
// by hand between two synchronous operations of one process (the run
// lock let go, in even rounds, or perhaps still kept for the first one's
// snapshot) is whole again after the second: the process checks the
// file before it trusts where it knew it to end.
func TestMailboxCutBetweenSyncOps(t *testing.T) {
	betweenSyncOps(t, 50, func(r *run.Run, i int) {
		if i%2 == 0 {
			r.Sync() // the lock let go
		}
		path := fl(r).MailboxPath(mailbox.SteeringFile)
		data, err := os.ReadFile(path)
		must(t, err)
		cut := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
		must(t, os.WriteFile(path, data[:cut], 0o600))
	}, func(r *run.Run, i int, m *events.Message, err error) {
		must(t, err)
		checkMailboxes(t, r, fmt.Sprintf("round %d", i))
	})
}

// TestLogTornBetweenSyncOps: a torn line added to events.jsonl by hand
// between two synchronous operations of one process (the run lock
// perhaps still kept for the first one's snapshot) is cut by the
// second, as when the lock was let go: the process checks the log
// before it writes through the writer it kept open.
func TestLogTornBetweenSyncOps(t *testing.T) {
	torn := `{"seq":` + strings.Repeat("9", 4000)
	betweenSyncOps(t, 50, func(r *run.Run, i int) {
		f, err := os.OpenFile(fl(r).EventsPath(), os.O_WRONLY|os.O_APPEND, 0)
		must(t, err)
		_, err = f.WriteString(torn)
		must(t, err)
		must(t, f.Close())
	}, func(r *run.Run, i int, m *events.Message, err error) {
		must(t, err)
		data, err := os.ReadFile(fl(r).EventsPath())
		must(t, err)
		if !bytes.HasSuffix(data, []byte("\n")) || !bytes.Contains(data[bytes.LastIndexByte(data[:len(data)-1], '\n')+1:], []byte(m.ID)) {
			t.Errorf("round %d: events.jsonl does not end with the event of %s: it ends %q", i, m.ID, data[max(0, len(data)-200):])
		}
	})
}

// linkedBetweenSyncOps runs betweenSyncOps with the directory dir(r)
// moved elsewhere and a symbolic link to it put in its place after the
// first steer, and put back after the second: nothing the second steer
// writes may go through the link, which look(moved) tells (the same
// before the steer and after). It returns the run.
func linkedBetweenSyncOps(t *testing.T, dir func(r *run.Run) string, look func(moved string) string) *run.Run {
	t.Helper()
	moved := filepath.Join(t.TempDir(), "moved")
	var before string
	return betweenSyncOps(t, 50, func(r *run.Run, i int) {
		must(t, os.Rename(dir(r), moved))
		must(t, os.Symlink(moved, dir(r)))
		before = look(moved)
	}, func(r *run.Run, i int, m *events.Message, err error) {
		// err: the second steer's projection through the link is refused
		if after := look(moved); after != before {
			t.Errorf("round %d: written through the link %s: %s, then %s", i, dir(r), before, after)
		}
		must(t, os.Remove(dir(r)))
		must(t, os.Rename(moved, dir(r)))
	})
}

// TestMailboxDirLinkedBetweenSyncOps: the run's mailbox directory
// replaced by hand, between two synchronous operations of one process,
// by a symbolic link to where it was moved (its files the same, so they
// look unchanged): the second operation writes nothing through the link.
func TestMailboxDirLinkedBetweenSyncOps(t *testing.T) {
	r := linkedBetweenSyncOps(t, func(r *run.Run) string { return filepath.Join(r.Dir(), "mailbox") }, func(moved string) string {
		data, err := os.ReadFile(filepath.Join(moved, mailbox.SteeringFile))
		must(t, err)
		return string(data)
	})
	_, err := r.Send(context.Background(), run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: "c"})
	must(t, err)
	checkMailboxes(t, r, "the directory back")
}

// TestMailDirLinkedBetweenSyncOps: an agent's mail directory replaced by
// hand, between two synchronous operations of one process, by a
// symbolic link to where it was moved: the second operation delivers
// nothing through the link, though this process holds the directory
// open from the first.
func TestMailDirLinkedBetweenSyncOps(t *testing.T) {
	linkedBetweenSyncOps(t, func(r *run.Run) string { return tree(r).Dir("t1") }, func(moved string) string {
		entries, err := os.ReadDir(moved)
		must(t, err)
		return fmt.Sprint(len(entries), " entries")
	})
}

// TestMailboxEditedKeepingTimeBetweenSyncOps: a mailbox file's last line
// damaged by hand between two synchronous operations, its size kept and
// its modification time set back (as touch -r does), is still seen: its
// change time moved, which no program can set back.
func TestMailboxEditedKeepingTimeBetweenSyncOps(t *testing.T) {
	if _, ok := fsys.ChangeTime(statOf(t, t.TempDir())); !ok {
		t.Skip("no change time on this system")
	}
	betweenSyncOps(t, 50, func(r *run.Run, i int) {
		path := fl(r).MailboxPath(mailbox.SteeringFile)
		fi := statOf(t, path)
		data, err := os.ReadFile(path)
		must(t, err)
		last := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
		data[last] = 'X' // the last line no longer decodes; the size is the same
		must(t, os.WriteFile(path, data, 0o600))
		must(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
	}, func(r *run.Run, i int, m *events.Message, err error) {
		must(t, err)
		checkMailboxes(t, r, fmt.Sprintf("round %d", i))
	})
}

func statOf(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Lstat(path)
	must(t, err)
	return fi
}

// TestRepairWhileBatchHandedOver: a Repair that takes the appender's
// turn just after a commit batch (the run lock kept by another hold, so
// the lock epoch goes on) must not rebuild the mailbox files before the
// batch's projection job is in the projector's hands: else the job,
// which knows where the files ended before the batch, appends its lines
// after the rebuild has written them from the log, and a message is in
// its mailbox file twice (seen once in TestConcurrentSyncOpsSnapshotsRepair).
// The hook starts the Repair there and lets the commit go on once the
// Repair is past the mailbox files (held before open.jsonl, which it
// writes after them) or, when it waits for the turn, after a while.
func TestRepairWhileBatchHandedOver(t *testing.T) {
	r := newTestRun(t)
	ctx := context.Background()
	_, err := r.AddTask(ctx, "t1", state.TaskSpec{}, "leader")
	must(t, err)
	must(t, fl(r).Hold(ctx)) // the lock epoch goes on between the steers
	_, err = r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: "a"})
	must(t, err)

	paused, release := make(chan struct{}), make(chan struct{})
	var pause sync.Once
	restore := fsys.SetFault(func(op fsys.Op, path string) error {
		if op == fsys.OpCreate && strings.Contains(path, ".open.jsonl.tmp-") {
			pause.Do(func() { close(paused) })
			<-release
		}
		return nil
	})
	defer restore()
	repaired := make(chan error, 1)
	var once sync.Once
	file.SetHandOverHook(t, func() {
		once.Do(func() {
			go func() {
				_, err := r.Repair(ctx)
				repaired <- err
			}()
			select {
			case <-paused: // the Repair ran ahead of the job (the bug)
			case <-time.After(300 * time.Millisecond): // it waits for the turn
			}
		})
	})
	_, err = r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: "b"})
	must(t, err)
	close(release)
	must(t, <-repaired)
	restore()
	fl(r).Unhold()
	must(t, r.Root().Close())
	checkMailboxes(t, r, "after the repair")
}

// TestSnapshotNeverReadAhead: a reader that opened tasks.json just
// before a rewrite, and reads it once the rewrite after has written its
// state into that same file (by then the spare: rewriteKeepingInodes)
// but not yet renamed it into place, must not take that state, which
// tasks.json does not hold yet: its next read would find tasks.json at
// a lower seq ("tasks.json went from seq 324 back to 323", seen once in
// TestConcurrentSyncOpsSnapshotsRepair). The hook lets the reader open
// tasks.json, then has two rewrites made, the second held before its
// rename, and lets the reader read on.
func TestSnapshotNeverReadAhead(t *testing.T) {
	file.SetSnapshotIdle(t, time.Hour) // tasks.json is written at Sync only
	r := newTestRun(t)
	ctx := context.Background()
	_, err := r.AddTask(ctx, "t1", state.TaskSpec{}, "leader")
	must(t, err)
	steer := func(body string) {
		_, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: body})
		must(t, err)
		r.Sync() // writes tasks.json
	}
	steer("a")

	paused, release, written := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var hold atomic.Bool
	restore := fsys.SetFault(func(op fsys.Op, path string) error {
		if op == fsys.OpRename && filepath.Base(path) == "tasks.json" && hold.CompareAndSwap(true, false) {
			close(paused)
			<-release
		}
		return nil
	})
	defer restore()
	var once sync.Once
	file.SetSnapshotOpenedHook(t, func() {
		once.Do(func() {
			steer("b") // the file the reader opened is now the spare
			hold.Store(true)
			go func() {
				defer close(written)
				steer("c") // written into the spare, held before its rename
			}()
			<-paused
		})
	})
	first := fl(r).ReadSnapshot().Seq
	next := fl(r).ReadSnapshot().Seq
	close(release)
	<-written
	restore()
	if first > next {
		t.Fatalf("tasks.json read at seq %d, then at seq %d: the first read took a state not yet renamed into place", first, next)
	}
	if last := fl(r).ReadSnapshot().Seq; last <= next {
		t.Fatalf("after the held rewrite, tasks.json is at seq %d, want past %d", last, next)
	}
}
