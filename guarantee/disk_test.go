package guarantee

// Guarantee 5 of docs/guarantees.md (issue 3, part 6): a full disk or a read-only
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
	"github.com/crew-dev/crew/state"
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
	t.Cleanup(func() { root.Close() }) // snapshots still being written, before TempDir goes
	r, err := root.Create(run.CreateOptions{ID: "r1", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.AddTask(ctx, "t1", state.TaskSpec{}, "leader"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Transition(ctx, "t1", task.Start, "leader", "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Send(ctx, run.SendOptions{Kind: "steer", Task: "t1", From: "leader", Body: "first"}); err != nil {
		t.Fatal(err)
	}
	r.Sync() // its snapshot follows the operation's return: in place before the test looks
	return root, r, root.Dir()
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
			_, err := r.AddTask(ctx, "t2", state.TaskSpec{Agent: "newagent"}, "leader")
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
				logPath := filepath.Join(r.Dir(), "events.jsonl")
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
			root, r, _ := seamRun(t)
			restore := failing(syscall.ENOSPC, part, fsys.OpWrite, fsys.OpCreate, fsys.OpRename, fsys.OpLink)
			m, err := r.Send(ctx, run.SendOptions{Kind: "steer", Task: "t1", From: "leader", Body: "while full"})
			r.Sync() // tasks.json is written after the operation returns
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
			entries, errs, err := root.Mail().List("t1", false)
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
			if err != nil || st.Seq != assertDenseLog(t, filepath.Join(r.Dir(), "events.jsonl")) {
				t.Errorf("state at seq %d, log disagrees (%v)", st.Seq, err)
			}
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
			appendLines(t, filepath.Join(r.Dir(), "events.jsonl"), []byte("garbage"), []byte(`{"seq":5,"at":"2026-11-29T21:04:06.000Z","type":"task.started","run":"r1","task":"t1","actor":"t1","from":"pending","to":"running"}`))
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
			assertDenseLog(t, filepath.Join(r.Dir(), "events.jsonl"))
		})
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new temporary directory and
// returns it; it is unmounted when the test ends. Tests that need it are
// skipped, with the reason, where mounting is not possible (not root, or no
// mount(2) permission in a container).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting a small tmpfs to fill up needs root (the seam tests cover the same paths)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs on %s: %v (the seam tests cover the same paths)", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillDisk writes the file path until the file system is full and
// returns how many bytes it wrote.
func fillDisk(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for _, chunk := range []int{64 << 10, 4 << 10, 512, 1} {
		buf := make([]byte, chunk)
		for {
			m, err := f.Write(buf)
			n += int64(m)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				t.Fatalf("fill %s: %v", path, err)
			}
		}
	}
	return n
}

// diskOps are CLI operations that each must write at least body's length
// to the state root: on a full disk, every one of them must fail whole.
func diskOps(body string) [][]string {
	return [][]string{
		{"steer", "t2", body, "--run", "r1"},
		{"respond", "t1", body, "--run", "r1"},
		{"report", body, "--run", "r1", "--task", "t2"},
		{"broadcast", body, "--run", "r1"},
		{"follow-up", "t2", body, "--run", "r1"},
		{"task", "add", "t3", "--title", body, "--agent", "newagent", "--run", "r1"},
		{"run", "create", "--id", "r2", "--title", body, "--leader", "boss"},
		{"mail", "send", "--to", "t1", "--from", "leader", body},
	}
}

// diskRun sets up run r1 under dir: t1 waiting on a question, t2 pending.
func diskRun(t *testing.T, dir string) {
	t.Helper()
	crew(t, dir, "init")
	crew(t, dir, "run", "create", "--id", "r1")
	crew(t, dir, "task", "add", "t1", "--run", "r1")
	crew(t, dir, "task", "add", "t2", "--run", "r1")
	crew(t, dir, "task", "start", "t1", "--run", "r1")
	crew(t, dir, "ask", "Which DB?", "--run", "r1", "--task", "t1")
}

// TestFullDiskTmpfs: on a real tmpfs filled to the last byte, every kind
// of write (messages, a state change, a new task with its mailbox, a new
// run, mail send) exits 1 with "no space left on device", and every file
// and directory under .crew is byte-identical to before; readers still
// work; once the filler is deleted the next operation works and seq is
// dense.
func TestFullDiskTmpfs(t *testing.T) {
	mnt := mountTmpfs(t, 512<<10)
	dir := filepath.Join(mnt, "work")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	diskRun(t, dir)
	state := filepath.Join(dir, ".crew")
	logPath := filepath.Join(runDir(dir, "r1"), "events.jsonl")
	filler := filepath.Join(mnt, "filler")
	fillDisk(t, filler)

	body := strings.Repeat("full disk ", 1600) // 16,000 bytes: more than any page's slack
	for _, args := range diskOps(body) {
		name := strings.Join(args[:2], " ")
		before := takeImage(t, state)
		res := runCrew(t, dir, args...)
		if res.Code != 1 || !strings.Contains(res.Stderr, "no space left on device") {
			t.Errorf("%s on a full disk: exit %d, want 1 with the OS's reason\nstderr: %s", name, res.Code, res.Stderr)
		}
		assertSameImage(t, name+" on a full disk", state, before)
	}
	for _, args := range [][]string{{"pending", "--run", "r1"}, {"task", "list", "--run", "r1"}, {"events", "--run", "r1"}} {
		if res := runCrew(t, dir, args...); res.Code != 0 {
			t.Errorf("reader %s on a full disk: exit %d\n%s", strings.Join(args, " "), res.Code, res.Stderr)
		}
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	n := assertDenseLog(t, logPath)
	for _, args := range diskOps(body) {
		crew(t, dir, args...)
	}
	if got := assertDenseLog(t, logPath); got != n+6 {
		t.Errorf("after space came back the log has %d events, want %d", got, n+6)
	}
	for _, args := range [][]string{{"pending", "--run", "r1"}, {"task", "list", "--run", "r1"}, {"events", "--run", "r1"}, {"mail", "check"}} {
		if res := runCrew(t, dir, args...); res.Code != 0 {
			t.Errorf("after space came back, %s: exit %d\n%s", strings.Join(args, " "), res.Code, res.Stderr)
		}
	}
}

// TestDiskFillsWhileWriting: messages are sent until the disk fills up
// (the log append, a projection or the mail-tree copy may be the write
// that fails); every operation either succeeded or failed with exit 1 and
// "no space left on device" leaving every file as it was; after space is
// freed, the next writer brings the projections up to date and every
// message that succeeded is in the log, the mailbox file and the mail
// tree.
func TestDiskFillsWhileWriting(t *testing.T) {
	mnt := mountTmpfs(t, 256<<10)
	dir := filepath.Join(mnt, "work")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	diskRun(t, dir)
	state := filepath.Join(dir, ".crew")
	logPath := filepath.Join(runDir(dir, "r1"), "events.jsonl")
	// Leave a little room, then fill it with messages.
	filler := filepath.Join(mnt, "filler")
	fillDisk(t, filler)
	if err := os.Truncate(filler, fileSize(t, filler)-96<<10); err != nil {
		t.Fatal(err)
	}
	var sent []string
	failed := 0
	for i := 0; failed < 3 && i < 500; i++ {
		body := fmt.Sprintf("message %d %s", i, strings.Repeat("x", 1500))
		before := takeImage(t, state)
		res := runCrew(t, dir, "steer", "t2", body, "--run", "r1", "--json")
		switch {
		case res.Code == 0:
			sent = append(sent, body)
		case res.Code == 1 && strings.Contains(res.Stderr, "no space left on device"):
			failed++
			assertSameImage(t, fmt.Sprintf("steer %d failed", i), state, before)
		default:
			t.Fatalf("steer %d: exit %d\n%s", i, res.Code, res.Stderr)
		}
	}
	t.Logf("%d steers acknowledged, %d refused with ENOSPC", len(sent), failed)
	if failed == 0 || len(sent) == 0 {
		t.Fatalf("the disk never filled up (%d sent, %d failed)", len(sent), failed)
	}
	os.Remove(filler)
	crew(t, dir, "nudge", "t2", "--run", "r1") // the next writer catches the projections up
	assertDenseLog(t, logPath)

	out := crew(t, dir, "inbox", "--json", "--run", "r1", "--task", "t2")
	steering := logLines(t, filepath.Join(runDir(dir, "r1"), "mailbox", "steering.jsonl"))
	entries := crew(t, dir, "mail", "check", "t2", "--json")
	for _, body := range sent {
		if !strings.Contains(out, body) {
			t.Errorf("inbox lost a message that was acknowledged: %.20s…", body)
		}
		if !strings.Contains(entries, body) {
			t.Errorf("the mail tree lost a message that was acknowledged: %.20s…", body)
		}
	}
	if len(steering) != len(sent) {
		t.Errorf("steering.jsonl has %d lines, want %d (one per acknowledged steer)", len(steering), len(sent))
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestReadOnlyStateDir: on a read-only file system every write exits 1
// with "read-only file system" and changes nothing; readers that write
// nothing (pending, task list, events, run show, outbox --peek) still
// work, and outbox without --peek names it; after a remount read-write
// the next operation works with seq dense.
func TestReadOnlyStateDir(t *testing.T) {
	mnt := mountTmpfs(t, 4<<20)
	diskRun(t, mnt)
	state := filepath.Join(mnt, ".crew")
	logPath := filepath.Join(runDir(mnt, "r1"), "events.jsonl")
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("skipped: cannot remount %s read-only: %v", mnt, err)
	}
	before := takeImage(t, state)
	ops := append(diskOps("read-only"),
		[]string{"task", "start", "t2", "--run", "r1"},
		[]string{"outbox", "--run", "r1"},
		[]string{"repair", "r1"},
	)
	for _, args := range ops {
		res := runCrew(t, mnt, args...)
		if res.Code != 1 || !strings.Contains(res.Stderr, "read-only file system") {
			t.Errorf("%s on a read-only state root: exit %d, want 1 with the OS's reason\nstderr: %s", strings.Join(args, " "), res.Code, res.Stderr)
		}
		if args[0] == "outbox" && !strings.Contains(res.Stderr, "crew outbox --peek shows the messages without marking them") {
			t.Errorf("outbox on a read-only state root does not name --peek: %s", res.Stderr)
		}
	}
	assertSameImage(t, "writes on a read-only state root", state, before)
	for _, args := range [][]string{{"pending", "--run", "r1"}, {"task", "list", "--run", "r1"}, {"events", "--run", "r1"}, {"run", "show", "r1"}, {"mail", "check"}, {"outbox", "--peek", "--run", "r1"}} {
		if res := runCrew(t, mnt, args...); res.Code != 0 {
			t.Errorf("reader %s on a read-only state root: exit %d\n%s", strings.Join(args, " "), res.Code, res.Stderr)
		}
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", syscall.MS_REMOUNT, ""); err != nil {
		t.Fatalf("remount read-write: %v", err)
	}
	n := assertDenseLog(t, logPath)
	crew(t, mnt, "steer", "t2", "writable again", "--run", "r1")
	if got := assertDenseLog(t, logPath); got != n+1 {
		t.Errorf("after remount the log has %d events, want %d", got, n+1)
	}
}
