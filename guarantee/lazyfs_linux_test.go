package guarantee

// LazyFS (github.com/dsrhaslab/lazyfs; /work/shared/tools/lazyfs, built by
// .ci/run) for the power-loss suite: a FUSE file system that keeps every
// write in a page cache of its own until fsync(2), and loses what was not
// fsynced when it is told to (lazyfs::clear-cache) or killed. Operations on
// names (create, link, rename, unlink, mkdir) reach the disk at once, as
// they do on most journalled file systems within seconds; file data only
// when fsynced. That is a power loss at its harshest: every projection
// crew does not fsync loses its data and keeps its name.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// lazyfsEnv names the LazyFS binary (.ci/run builds it and exports this).
const lazyfsEnv = "CREW_LAZYFS"

// lazyfsOrSkip returns the LazyFS binary, or skips the test saying what is
// missing: the binary, root (a FUSE mount with allow_other), /dev/fuse.
func lazyfsOrSkip(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(lazyfsEnv)
	if bin == "" {
		t.Skipf("skipped: %s is not set (the path of a LazyFS binary: .ci/run builds one, caches it and sets it; make powerloss uses the cached one)", lazyfsEnv)
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Skipf("skipped: %s=%s is not an executable file (%v)", lazyfsEnv, bin, err)
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting LazyFS (FUSE, allow_other) needs root")
	}
	if fi, err := os.Stat("/dev/fuse"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Skipf("skipped: no FUSE device /dev/fuse (%v)", err)
	}
	return bin
}

// lazyFS is one LazyFS file system: the directory it keeps its files in
// (the disk) and the mount point it serves them at, mounted again after
// every crash.
type lazyFS struct {
	bin       string
	disk, mnt string // the disk (what survives a crash) and the mount point
	cfg, log  string
	fifo      string   // fault commands
	done      *os.File // fault completions, held open for reading
	cmd       *exec.Cmd
	exited    chan struct{}          // closed when the LazyFS process has ended
	killed    bool                   // this test killed it (kill), since its mount
	hang      atomic.Pointer[string] // why it was found hung (hung), since its mount
}

// newLazyFS prepares a LazyFS file system in a new temporary directory,
// with a cache of cacheMB megabytes (no eviction: nothing unsynced reaches
// the disk), and unmounts it when the test ends.
func newLazyFS(t *testing.T, bin string, cacheMB int) *lazyFS {
	t.Helper()
	d := t.TempDir()
	l := &lazyFS{bin: bin, disk: filepath.Join(d, "disk"), mnt: filepath.Join(d, "mnt"),
		cfg: filepath.Join(d, "lazyfs.toml"), log: filepath.Join(d, "lazyfs.log"), fifo: filepath.Join(d, "faults.fifo")}
	doneFifo := filepath.Join(d, "faults-done.fifo")
	for _, dir := range []string{l.disk, l.mnt} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`[faults]
fifo_path=%q
fifo_path_completed=%q
[cache]
apply_eviction=false
[cache.simple]
custom_size="%dmb"
blocks_per_page=1
[filesystem]
log_all_operations=false
logfile=""
`, l.fifo, doneFifo, cacheMB)
	if err := os.WriteFile(l.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{l.fifo, doneFifo} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// LazyFS opens the completion FIFO for writing as it starts, which
	// blocks until a reader has it open: this one, for good (O_RDWR never
	// blocks, and keeps it open across LazyFS's restarts).
	done, err := os.OpenFile(doneFifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.done = done
	t.Cleanup(func() {
		if e := l.ended(); e != "" && t.Failed() {
			t.Log(e) // the failure may be LazyFS's, not crew's
		}
		l.kill()
		l.unmount()
		done.Close()
	})
	return l
}

// mount starts LazyFS (in the foreground, so that this process holds it
// and can kill it) and waits until it serves the mount point.
func (l *lazyFS) mount() error {
	logf, err := os.OpenFile(l.log, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(l.bin, l.mnt, "--config-path", l.cfg,
		"-o", "allow_other", "-o", "modules=subdir", "-o", "subdir="+l.disk, "-f")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start LazyFS: %w", err)
	}
	l.cmd, l.exited, l.killed = cmd, make(chan struct{}), false
	l.hang.Store(nil)
	go func(exited chan struct{}) { cmd.Wait(); close(exited) }(l.exited)
	for deadline := time.Now().Add(60 * time.Second); ; {
		// Mounted, and its fault worker reads the FIFO (it starts once
		// mounted, and says so).
		if l.mounted() {
			if data, _ := os.ReadFile(l.log); bytes.Contains(data, []byte("waiting for fault commands")) {
				return nil
			}
		}
		select {
		case <-l.exited:
			return fmt.Errorf("LazyFS ended before it mounted %s: %s\n%s", l.mnt, cmd.ProcessState, l.logTail())
		default:
		}
		if time.Now().After(deadline) {
			l.kill()
			return fmt.Errorf("LazyFS did not mount %s within a minute\n%s", l.mnt, l.logTail())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// mounted reports whether a LazyFS file system is mounted at the mount
// point (/proc/self/mountinfo: field 5 is the mount point, and the file
// system type follows the " - " separator).
func (l *lazyFS) mounted() bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[4] != l.mnt {
			continue
		}
		if _, after, ok := strings.Cut(line, " - "); ok && strings.HasPrefix(after, "fuse.lazyfs ") {
			return true
		}
	}
	return false
}

// alive reports whether the LazyFS process is running.
func (l *lazyFS) alive() bool {
	if l.exited == nil {
		return false
	}
	select {
	case <-l.exited:
		return false
	default:
		return true
	}
}

// clearCache drops every write LazyFS holds that was not fsynced (the
// fault lazyfs::clear-cache) and waits until it says it is done.
func (l *lazyFS) clearCache() error {
	if err := l.command("lazyfs::clear-cache"); err != nil {
		return err
	}
	l.done.SetReadDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(l.done)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			why := fmt.Sprintf("no answer to lazyfs::clear-cache in 30 s (%v)", err)
			l.hang.Store(&why)
			return fmt.Errorf("waiting for LazyFS to clear its cache: %w\n%s", err, l.logTail())
		}
		if strings.TrimSpace(line) == "finished::clear-cache" {
			return nil
		}
	}
}

// usage returns how full LazyFS's cache is, in percent of its pages
// (lazyfs::display-cache-usage, which it answers in its output). A full
// cache writes through to the disk, which would make unsynced writes
// survive a cut: the suite checks it never comes near.
func (l *lazyFS) usage() (int, error) {
	before, err := os.ReadFile(l.log)
	if err != nil {
		return 0, err
	}
	if err := l.command("lazyfs::display-cache-usage"); err != nil {
		return 0, err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		data, err := os.ReadFile(l.log)
		if err != nil {
			return 0, err
		}
		if len(data) < len(before) {
			continue
		}
		_, after, ok := strings.Cut(string(data[len(before):]), "cache usage (%pages) is ")
		if !ok {
			continue
		}
		var pct float64
		if _, err := fmt.Sscanf(after, "%g%%", &pct); err == nil {
			return int(math.Ceil(pct)), nil
		}
	}
	why := "no answer to lazyfs::display-cache-usage"
	l.hang.Store(&why)
	return 0, fmt.Errorf("LazyFS did not say how full its cache is\n%s", l.logTail())
}

// command writes a fault command to LazyFS's FIFO.
func (l *lazyFS) command(cmd string) error {
	if !l.alive() {
		return fmt.Errorf("LazyFS is not running\n%s", l.logTail())
	}
	// Non-blocking: with LazyFS gone, opening a FIFO nobody reads fails
	// (ENXIO) instead of waiting for ever.
	f, err := os.OpenFile(l.fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("LazyFS fault FIFO: %w", err)
	}
	_, err = f.WriteString(cmd + "\n")
	f.Close()
	if err != nil {
		return fmt.Errorf("LazyFS fault FIFO: %w", err)
	}
	return nil
}

// kill crashes LazyFS (SIGKILL: its cache, everything not fsynced, is
// lost, as LazyFS's own crash faults do it) and waits until it has ended.
// Its mount point then answers ENOTCONN until unmounted.
func (l *lazyFS) kill() {
	if l.cmd == nil || l.cmd.Process == nil {
		return
	}
	if l.alive() {
		l.killed = true // one that had ended on its own stays so (failedOnItsOwn)
	}
	l.cmd.Process.Signal(syscall.SIGKILL)
	<-l.exited
}

// hung records that LazyFS stopped answering (why), and kills it: the
// kernel then fails its pending requests (ENOTCONN), so that the crew
// processes stuck in them (state D, request_wait_answer) can end. Seen
// under load: LazyFS's threads all waiting on its own locks, crew's on
// an openat, a linkat and a stat of the mount. Safe from any goroutine
// while the test goroutine does not mount or kill.
func (l *lazyFS) hung(why string) {
	l.hang.Store(&why)
	if l.cmd != nil && l.cmd.Process != nil {
		l.cmd.Process.Signal(syscall.SIGKILL)
	}
}

// failedOnItsOwn says how LazyFS failed on its own since it was mounted,
// "" if it did not: it hung (hung), or it ended without this test
// killing it. For a lane that then ends: the failure is LazyFS's, not
// crew's. Called on the test goroutine.
func (l *lazyFS) failedOnItsOwn() string {
	if why := l.hang.Load(); why != nil {
		return "it hung: " + *why
	}
	if l.exited == nil || l.alive() || l.killed {
		return ""
	}
	return fmt.Sprintf("it ended on its own (%s)", l.cmd.ProcessState)
}

// unmount unmounts the (dead) file system. Processes still using it make
// it busy for a moment; a lazy detach is the last resort.
func (l *lazyFS) unmount() error {
	var err error
	for range 200 {
		err = syscall.Unmount(l.mnt, 0)
		if err == nil || errors.Is(err, syscall.EINVAL) { // EINVAL: not mounted
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if derr := syscall.Unmount(l.mnt, syscall.MNT_DETACH); derr != nil && !errors.Is(derr, syscall.EINVAL) {
		return fmt.Errorf("unmount %s: %v, then %v", l.mnt, err, derr)
	}
	return fmt.Errorf("unmount %s: %v (detached instead)", l.mnt, err)
}

// ended is "" while LazyFS runs (or was never started), else a line
// saying that it ended on its own, how, and the end of its output: for
// a failed test, which may be LazyFS's failure, not crew's (crew's
// processes then get ENOTCONN, "transport endpoint is not connected").
func (l *lazyFS) ended() string {
	if l.exited == nil || l.alive() {
		return ""
	}
	return fmt.Sprintf("\nLazyFS had ended (%s)\n%s", l.cmd.ProcessState, l.logTail())
}

// logTail is the end of LazyFS's output, for error messages.
func (l *lazyFS) logTail() string {
	data, _ := os.ReadFile(l.log)
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return "LazyFS output (end): " + string(data)
}
