//go:build linux

package proc

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLive: a running child is listed with its parent, group and
// session; once it has exited and is not yet reaped (a zombie) it is
// not, and GroupAlive says its group is gone.
func TestLive(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	i := slices.IndexFunc(Live(), func(s Stat) bool { return s.PID == pid })
	if i < 0 {
		t.Fatalf("the running child %d is not listed", pid)
	}
	sid, _ := unix.Getsid(0)
	if s := Live()[i]; s.PPID != os.Getpid() || s.PGID != pid || s.Session != sid {
		t.Fatalf("child listed as %+v, want parent %d, group %d, session %d", s, os.Getpid(), pid, sid)
	}
	if !GroupAlive(pid) {
		t.Fatal("the running child's group is not alive")
	}
	cmd.Process.Kill()
	// Not reaped: a zombie until cmd.Wait.
	for end := time.Now().Add(10 * time.Second); GroupAlive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the killed, unreaped child's group is still alive")
		}
	}
	if slices.ContainsFunc(Live(), func(s Stat) bool { return s.PID == pid }) {
		t.Fatal("a zombie is listed as live")
	}
}
