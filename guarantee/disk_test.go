package guarantee

// Guarantee 5 of SPEC §7 (issue 3, part 6): a full disk or a read-only
// directory gives a clear error (exit 1, the OS's reason in the message)
// and leaves every file as it was before the operation; once space is back
// the next operation works and seq stays dense.
//
// Two levels: the library with faults injected through the narrow seam
// (internal/fsys) at a chosen write, fsync, rename, link or create; and the
// crew binary on a real, small tmpfs that is filled up and remounted
// read-only (needs root: mount(2)).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	crewlib "github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/task"
)

// failing installs a fault that fails every op (any of ops) on a path
// whose part below the state root contains part (ends in part without its
// "$", if part ends in "$"), with errno, and returns a
// function that removes it and reports how many operations it failed.
func failing(errno error, part string, ops ...fsys.Op) (restore func() int) {
	n := 0
	undo := fsys.SetFault(func(op fsys.Op, path string) error {
		if i := strings.LastIndex(path, ".crew"); i >= 0 {
			path = path[i:] // test directories are named after the test
		}
		match := strings.Contains(path, part)
		if suffix, ok := strings.CutSuffix(part, "$"); ok {
			match = strings.HasSuffix(path, suffix)
		}
		for _, o := range ops {
			if o == op && match {
				n++
				return errno
			}
		}
		return nil
	})
	return func() int { undo(); return n }
}

// seamRun makes a state root in a temporary directory with run r1 and
// task t1 (running) through the library, and returns the root, the run and
// the .crew directory.
func seamRun(t *testing.T) (*run.Root, *run.Run, string) {
	t.Helper()
	ctx := context.Background()
	root, err := run.Init(t.TempDir(), crewlib.PrivatePerm)
	if err != nil {
		t.Fatal(err)
	}
	r, err := root.Create(run.CreateOptions{ID: "r1", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.AddTask(ctx, "t1", run.TaskSpec{}, "leader"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Transition(ctx, "t1", task.Start, "leader", "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Send(ctx, run.SendOptions{Kind: "steer", Task: "t1", From: "leader", Body: "first"}); err != nil {
		t.Fatal(err)
	}
	return root, r, root.Dir
}

// wantOSError fails unless err is the injected errno, with the OS's words
// for it in the message.
func wantOSError(t *testing.T, what string, err, errno error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: succeeded, want %v", what, errno)
	case !errors.Is(err, errno):
		t.Errorf("%s: error %v is not %v", what, err, errno)
	case !strings.Contains(err.Error(), errno.Error()):
		t.Errorf("%s: message %q does not say %q", what, err, errno.Error())
	case errors.Is(err, crewlib.ErrInvalid) || errors.Is(err, crewlib.ErrConflict) || errors.Is(err, crewlib.ErrNotFound) || errors.Is(err, crewlib.ErrDamaged):
		t.Errorf("%s: error %v wraps a sentinel: it would not exit 1", what, err)
	}
}

// TestSeamFailedCommitLeavesEveryFile: ENOSPC or EIO on the log's write
// or fsync fails the operation with the OS's reason, every file under
// .crew (names, modes, bytes; projections and mail tree included) is as it
// was, and the next operation works with seq dense.
func TestSeamFailedCommitLeavesEveryFile(t *testing.T) {
	ctx := context.Background()
	ops := []struct {
		name string
		do   func(r *run.Run) error
	}{
		{"steer", func(r *run.Run) error {
			_, err := r.Send(ctx, run.SendOptions{Kind: "steer", Task: "t1", From: "leader", Body: "second"})
			return err
		}},
		{"ask", func(r *run.Run) error {
			_, err := r.Send(ctx, run.SendOptions{Kind: "question", Task: "t1", From: "t1", Body: "Which DB?"})
			return err
		}},
		{"broadcast", func(r *run.Run) error {
			_, err := r.Send(ctx, run.SendOptions{Kind: "message", Task: "*", From: "leader", Body: "all stop"})
			return err
		}},
		{"complete", func(r *run.Run) error {
			_, err := r.Transition(ctx, "t1", task.Complete, "t1", "", nil)
			return err
		}},
		{"task add", func(r *run.Run) error {
			_, err := r.AddTask(ctx, "t2", run.TaskSpec{Agent: "newagent"}, "leader")
			return err
		}},
		{"inbox", func(r *run.Run) error {
			_, err := r.Inbox(ctx, "t1", run.InboxOptions{})
			return err
		}},
	}
	faults := []struct {
		errno error
		op    fsys.Op
	}{
		{syscall.ENOSPC, fsys.OpWrite},
		{syscall.ENOSPC, fsys.OpSync},
		{syscall.EIO, fsys.OpSync},
		{syscall.EIO, fsys.OpWrite},
	}
	for _, o := range ops {
		for _, f := range faults {
			t.Run(fmt.Sprintf("%s/%s/%s", o.name, f.op, f.errno), func(t *testing.T) {
				root, r, dir := seamRun(t)
				logPath := r.EventsPath()
				before := takeImage(t, dir)
				restore := failing(f.errno, "events.jsonl", f.op)
				err := o.do(r)
				if restore() == 0 {
					t.Fatalf("the fault was never reached")
				}
				wantOSError(t, o.name, err, f.errno)
				assertSameImage(t, o.name+" failed", dir, before)

				// Space is back: the same operation works, in this
				// process and in a fresh one, and seq is dense.
				if err := o.do(r); err != nil {
					t.Fatalf("%s after the fault: %v", o.name, err)
				}
				r2, err := root.Open("r1")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r2.Send(ctx, run.SendOptions{Kind: "message", Task: "*", From: "leader", Body: "after"}); err != nil && !errors.Is(err, crewlib.ErrConflict) {
					t.Fatalf("next operation: %v", err)
				}
				assertDenseLog(t, logPath)
				if st, err := r2.State(); err != nil || st.Err() != nil {
					t.Fatalf("state after the fault: %v %v", err, st.Err())
				}
			})
		}
	}
}

// TestSeamFailedProjectionIsCaughtUp: when the log append succeeded but a
// projection could not be written (disk full just after the commit), the
// operation succeeds (it is durable) and the next operation brings
// tasks.json, the mailbox file and the mail-tree copy up to date from the
// log.
func TestSeamFailedProjectionIsCaughtUp(t *testing.T) {
	ctx := context.Background()
	for _, part := range []string{"mailbox" + string(os.PathSeparator), "tasks.json", filepath.Join("mail", "t1")} {
		t.Run(filepath.Base(part), func(t *testing.T) {
			root, r, dir := seamRun(t)
			restore := failing(syscall.ENOSPC, part, fsys.OpWrite, fsys.OpCreate, fsys.OpRename, fsys.OpLink)
			m, err := r.Send(ctx, run.SendOptions{Kind: "steer", Task: "t1", From: "leader", Body: "while full"})
			if restore() == 0 {
				t.Fatalf("the fault was never reached")
			}
			if err != nil {
				t.Fatalf("a committed operation must succeed even if a projection failed: %v", err)
			}
			// A later operation, from another process's point of view.
			r2, err := root.Open("r1")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r2.Send(ctx, run.SendOptions{Kind: "steer", Task: "t1", From: "leader", Body: "after"}); err != nil {
				t.Fatal(err)
			}
			entries, errs, err := root.MailTree().List("t1", false)
			if err != nil || len(errs) > 0 {
				t.Fatal(err, errs)
			}
			found := false
			for _, e := range entries {
				found = found || e.Mail.ID == m.ID
			}
			if !found {
				t.Errorf("the mail-tree copy of the message sent while the disk was full was never delivered")
			}
			lines := logLines(t, filepath.Join(r.Dir(), "mailbox", mailbox.SteeringFile))
			if len(lines) != 3 {
				t.Errorf("steering.jsonl has %d lines, want 3:\n%s", len(lines), lines)
			}
			st, err := r2.State()
			if err != nil || st.Seq != assertDenseLog(t, r.EventsPath()) {
				t.Errorf("state at seq %d, log disagrees (%v)", st.Seq, err)
			}
			_ = dir
		})
	}
}

// TestSeamFailedRunCreateLeavesNothing: creating a run when a create,
// write, fsync or rename fails leaves no run directory, no temporary
// directory and no new mail directory behind.
func TestSeamFailedRunCreateLeavesNothing(t *testing.T) {
	for _, f := range []struct {
		op   fsys.Op
		part string
	}{
		{fsys.OpCreate, "manifest.json"},
		{fsys.OpWrite, "events.jsonl"},
		{fsys.OpSync, "events.jsonl"},
		{fsys.OpRename, filepath.Join("runs", "r2")},
		{fsys.OpSync, filepath.Join("state", "runs") + "$"},
	} {
		t.Run(string(f.op)+"/"+filepath.Base(f.part), func(t *testing.T) {
			root, _, dir := seamRun(t)
			before := takeImage(t, dir)
			restore := failing(syscall.ENOSPC, f.part, f.op)
			_, err := root.Create(run.CreateOptions{ID: "r2", Leader: "boss", Dir: t.TempDir()})
			if restore() == 0 {
				t.Fatalf("the fault was never reached")
			}
			wantOSError(t, "run create", err, syscall.ENOSPC)
			assertSameImage(t, "run create failed", dir, before)
			if _, err := root.Create(run.CreateOptions{ID: "r2", Leader: "boss", Dir: t.TempDir()}); err != nil {
				t.Fatalf("run create after the fault: %v", err)
			}
		})
	}
}

// TestSeamFailedMailSendLeavesNothing: crew mail send with ENOSPC or EIO
// on the temp file, its fsync, the link or the directory fsync delivers
// nothing (no file, no temp file) and says why.
func TestSeamFailedMailSendLeavesNothing(t *testing.T) {
	t1 := filepath.Join("mail", "t1") + string(os.PathSeparator)
	for _, f := range []struct {
		op    fsys.Op
		errno error
		part  string
	}{
		{fsys.OpCreate, syscall.ENOSPC, t1},
		{fsys.OpWrite, syscall.ENOSPC, t1},
		{fsys.OpSync, syscall.EIO, t1 + ".tmp-"}, // the message file
		{fsys.OpLink, syscall.EIO, t1},
		{fsys.OpSync, syscall.EIO, t1 + ".$"}, // the directory, after the link
	} {
		t.Run(string(f.op)+"/"+filepath.Base(f.part), func(t *testing.T) {
			root, _, dir := seamRun(t)
			before := takeImage(t, dir)
			restore := failing(f.errno, f.part, f.op)
			_, err := root.SendMail(run.MailOptions{To: "t1", From: "leader", Body: "hello"})
			if restore() == 0 {
				t.Fatalf("the fault was never reached")
			}
			wantOSError(t, "mail send", err, f.errno)
			assertSameImage(t, "mail send failed", dir, before)
			if _, err := root.SendMail(run.MailOptions{To: "t1", From: "leader", Body: "hello"}); err != nil {
				t.Fatalf("mail send after the fault: %v", err)
			}
		})
	}
}

// TestSeamFailedRepairLeavesEveryFile: crew repair on a damaged log that
// cannot write its quarantine file or the new log (ENOSPC on create,
// write, fsync or rename) leaves the log, the projections and the run
// directory as they were (no stray quarantine file), and works once space
// is back.
func TestSeamFailedRepairLeavesEveryFile(t *testing.T) {
	ctx := context.Background()
	for _, f := range []struct {
		op   fsys.Op
		part string
	}{
		{fsys.OpCreate, "quarantine"},
		{fsys.OpWrite, "quarantine"},
		{fsys.OpCreate, "events.jsonl.tmp"},
		{fsys.OpWrite, "events.jsonl.tmp"},
		{fsys.OpSync, "events.jsonl.tmp"},
		{fsys.OpRename, "events.jsonl"},
	} {
		t.Run(string(f.op)+"/"+f.part, func(t *testing.T) {
			_, r, dir := seamRun(t)
			appendLines(t, r.EventsPath(), []byte("garbage"), []byte(`{"seq":5,"at":"2026-11-29T21:04:06.000Z","type":"task.started","run":"r1","task":"t1","actor":"t1","from":"pending","to":"running"}`))
			before := takeImage(t, dir)
			restore := failing(syscall.ENOSPC, f.part, f.op)
			_, err := r.Repair(ctx)
			if restore() == 0 {
				t.Fatalf("the fault was never reached")
			}
			wantOSError(t, "repair", err, syscall.ENOSPC)
			assertSameImage(t, "repair failed", dir, before)
			if _, err := r.Repair(ctx); err != nil {
				t.Fatalf("repair after the fault: %v", err)
			}
			assertDenseLog(t, r.EventsPath())
		})
	}
}
