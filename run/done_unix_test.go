//go:build unix

package run

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crew-dev/crew"
)

// A check that times out is killed with everything it started: a
// background child of the shell does not outlive it.
func TestVerifyTimeoutKillsTheProcessGroup(t *testing.T) {
	r, ctx := doneRun(t, `sleep 60 & echo $! > child.pid; wait`)
	c, err := r.Verify(ctx, "t1", 300*time.Millisecond)
	if !errors.Is(err, crew.ErrConflict) || c == nil || !c.TimedOut || c.ExitCode != -1 {
		t.Fatalf("Verify = %+v, %v; want a timed-out check and a conflict", c, err)
	}
	data, err := os.ReadFile(filepath.Join(r.Manifest.Dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // should the test fail
	// SIGKILL is delivered before kill(2) returns; the child is gone or a
	// zombie waiting for init to reap it. Poll that (not a time bound).
	for i := 0; ; i++ {
		if !alive(pid) {
			break
		}
		if i == 500 {
			t.Fatalf("the check's child %d still runs after the check timed out", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid runs (exists and is not a zombie).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return runtime.GOOS != "linux"
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
