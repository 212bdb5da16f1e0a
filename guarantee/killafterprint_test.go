package guarantee

import (
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
)

// TestKill9AfterPrint: a crew command is killed with SIGKILL as soon as
// it has printed its result, while its snapshots may still be written in
// the background (the run lock kept for them); sometimes a second crew
// process writes the same run at once. The next command succeeds, and
// once one command ended cleanly every projection agrees with the log.
func TestKill9AfterPrint(t *testing.T) {
	dir := newRun(t, "r1", "t1", "t2")
	crew(t, dir, "task", "start", "t2", "--run", "r1")
	killAfterPrint := func(args ...string) {
		cmd := exec.Command(crewBin, append(args, "--run", "r1")...)
		cmd.Dir, cmd.Env = dir, crewEnv()
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Error(err)
			return
		}
		if err := cmd.Start(); err != nil {
			t.Error(err)
			return
		}
		b := make([]byte, 1)
		_, rerr := out.Read(b)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if rerr != nil {
			t.Errorf("crew %v printed nothing: %v", args, rerr)
		}
	}
	for round := range 60 {
		var wg sync.WaitGroup
		n := 1 + round%3
		for k := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch (round + k) % 3 {
				case 0:
					killAfterPrint("steer", "t1", fmt.Sprint("steer ", round, k))
				case 1:
					killAfterPrint("steer", "t2", fmt.Sprint("s2 ", round, k))
				case 2:
					killAfterPrint("report", fmt.Sprint("r ", round, k), "--task", "t2")
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		if round%10 == 9 {
			crew(t, dir, "steer", "t1", fmt.Sprint("clean ", round), "--run", "r1")
			checkProjections(t, dir, "r1", eventsCLI(t, dir, "r1"))
			if t.Failed() {
				t.FailNow()
			}
		}
	}
	checkRebuild(t, dir, "r1")
}
