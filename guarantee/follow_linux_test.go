//go:build linux

package guarantee

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// follow starts a long-running crew command (--follow, watch) in dir and
// returns, once the process has positioned its cursor in the log, a
// function that returns its next line of output; the process is killed
// when the test ends.
func follow(t *testing.T, dir string, args ...string) func() string {
	t.Helper()
	cmd := exec.Command(crewBin, args...)
	cmd.Dir, cmd.Env = dir, crewEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<22)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Wait until it has placed its cursor: it opens the log, seeks, and
	// then sets up its file-system watch (an inotify descriptor).
	for !hasOpen(cmd.Process.Pid, "events.jsonl") || !hasOpen(cmd.Process.Pid, "inotify") {
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("crew %s ended: %s", strings.Join(args, " "), stderr.String())
			}
			return l
		case <-time.After(30 * time.Second): // a hang, not a speed limit
			t.Fatalf("crew %s printed nothing for 30s; stderr: %s", strings.Join(args, " "), stderr.String())
		}
		return ""
	}
}

// TestTornLogTailFollow: followers that started while the log had a torn
// last line do not print it, and print the next writer's record whole,
// although that record was written where the torn line was: crew events
// --follow from the start, crew events --follow --since the last seq, and
// crew watch (which starts at the last seq). The torn line is shorter than
// the next record, so a follower positioned after the torn bytes would
// land in the middle of it.
func TestTornLogTailFollow(t *testing.T) {
	dir := newRun(t, "r1", "t1")
	appendBytes(t, filepath.Join(runDir(dir, "r1"), "events.jsonl"), tornFragments["cut short"])
	all := follow(t, dir, "events", "--follow", "--json")
	since := follow(t, dir, "events", "--follow", "--json", "--since", "2")
	watch := follow(t, dir, "watch", "--json")
	for want := int64(1); want <= 2; want++ {
		if e, err := decodeEvent([]byte(all())); err != nil || e.Seq != want {
			t.Fatalf("crew events --follow printed seq %d (%v), want %d", e.Seq, err, want)
		}
	}
	crew(t, dir, "steer", "t1", "after the torn line")
	for name, next := range map[string]func() string{"events --follow": all, "events --follow --since 2": since} {
		l := next()
		if e, err := decodeEvent([]byte(l)); err != nil || e.Seq != 3 || e.msg == nil || e.msg.Body != "after the torn line" {
			t.Errorf("crew %s printed %q (%v), want seq 3 with the new steer", name, l, err)
		}
	}
	var m struct {
		Seq  int64  `json:"seq"`
		Body string `json:"body"`
	}
	if l := watch(); json.Unmarshal([]byte(l), &m) != nil || m.Seq != 3 || m.Body != "after the torn line" {
		t.Errorf("crew watch printed %q, want the new steer (seq 3)", l)
	}
}
