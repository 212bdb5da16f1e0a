package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/task"
)

// crewEnv is the environment of a crew process acting in a run.
func crewEnv(root, runID string) []string {
	return append(os.Environ(), "CREW_DIR="+root, "CREW_RUN="+runID)
}

// command returns a crew process, its output thrown away and its errors
// kept.
func command(crewBin string, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	cmd := exec.Command(crewBin, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	return cmd, &stderr
}

// timeProcess runs crew with args and returns its wall time in
// milliseconds, from start to exit. A failing process is an error.
func timeProcess(crewBin string, env []string, args ...string) (float64, error) {
	cmd, stderr := command(crewBin, env, args...)
	start := time.Now()
	err := cmd.Run()
	ms := float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		return 0, fmt.Errorf("crew %v: %v: %s", args, err, stderr)
	}
	return ms, nil
}

// versionOps returns the driver of version_per_s: `crew version`
// processes one after another, per second: what starting a crew process
// costs here, the ceiling of cliOps.
func versionOps(c config) func(time.Duration) (float64, error) {
	return rate(func(int) error {
		_, err := timeProcess(c.crew, crewEnv("", ""), "version")
		return err
	})
}

// helloOps builds, into dir, the least a command-line program can be in
// Go (static, printing one line) and returns the driver of hello_per_s:
// its processes one after another, per second, as versionOps runs crew.
func helloOps(dir string) (func(time.Duration) (float64, error), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for name, text := range map[string]string{
		"go.mod":  "module hello\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return nil, err
		}
	}
	bin := filepath.Join(dir, "hello")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir, build.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build hello: %v\n%s", err, out)
	}
	return rate(func(int) error {
		_, err := timeProcess(bin, nil)
		return err
	}), nil
}

// cliOps runs `crew steer` processes one after another for c.cliOps and
// returns processes per second.
func cliOps(tmp string, c config) (float64, error) {
	dir := filepath.Join(tmp, "cli")
	if _, err := newRun(dir, "cli", "c1"); err != nil {
		return 0, err
	}
	env := crewEnv(filepath.Join(dir, ".crew"), "cli")
	for i := range 20 { // warm-up
		if _, err := timeProcess(c.crew, env, "steer", "c1", body("steer", i, 120)); err != nil {
			return 0, err
		}
	}
	return rate(func(i int) error {
		_, err := timeProcess(c.crew, env, "steer", "c1", body("steer", 20+i, 120))
		return err
	})(c.cliOps)
}

type wakeResult struct {
	p50, p99, max float64
	early         int
	callP50       float64 // from Respond's call, not its return
}

// wake measures how soon a blocked `crew ask --wait` process prints the
// answer after the leader's Respond returns: the process is started, the
// bench waits until its question is in the log and a little longer (so
// the process is blocked in its wait), calls Respond through the library
// and times from Respond's return to the arrival of the process's output
// line. An answer printed before Respond returned (the process read the
// line before its fsync finished) counts as 0 and is counted in early.
func wake(tmp string, c config) (wakeResult, error) {
	dir := filepath.Join(tmp, "wake")
	r, err := newRun(dir, "wake", "w1")
	if err != nil {
		return wakeResult{}, err
	}
	return wakeSamples(c, r, append(crewEnv(filepath.Join(dir, ".crew"), "wake"), "CREW_TASK=w1"))
}

// wakeSamples takes c.wake samples (after 5 not counted) of wake's
// measure on run r, whose task w1 is running; env is the environment of
// the crew ask --wait processes (their store, CREW_RUN, CREW_TASK=w1).
func wakeSamples(c config, r *run.Run, env []string) (wakeResult, error) {
	ctx := context.Background()
	var lat, fromCall []float64
	var res wakeResult
	for i := range c.wake + 5 {
		cmd, stderr := command(c.crew, env, "ask", body("question", i, 80), "--wait", "--timeout", "60s")
		out, err := cmd.StdoutPipe()
		if err != nil {
			return res, err
		}
		if err := cmd.Start(); err != nil {
			return res, err
		}
		arrived := make(chan time.Time, 1)
		go func() {
			line, err := bufio.NewReader(out).ReadString('\n')
			t := time.Now()
			if err != nil || line == "" {
				t = time.Time{}
			}
			arrived <- t
		}()
		if err := waitFor(ctx, r, "w1", task.Waiting, 30*time.Second); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return res, fmt.Errorf("wake sample %d: %v: %s", i, err, stderr)
		}
		time.Sleep(20 * time.Millisecond) // the asker is now blocked in its wait
		called := time.Now()
		if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindResponse, Task: "w1", From: run.Leader, Body: body("answer", i, 80)}); err != nil {
			return res, err
		}
		responded := time.Now()
		t := <-arrived
		if err := cmd.Wait(); err != nil || t.IsZero() {
			return res, fmt.Errorf("wake sample %d: crew ask --wait: %v: %s", i, err, stderr)
		}
		if i < 5 {
			continue // warm-up
		}
		fromCall = append(fromCall, float64(t.Sub(called).Microseconds())/1000)
		d := t.Sub(responded)
		if d < 0 {
			res.early++
			d = 0
		}
		lat = append(lat, float64(d.Microseconds())/1000)
	}
	res.p50, res.p99, res.max = percentile(lat, 50), percentile(lat, 99), percentile(lat, 100)
	res.callP50 = percentile(fromCall, 50)
	return res, nil
}

// waitFor blocks until the task has the state, woken by the run's
// watcher.
func waitFor(ctx context.Context, r *run.Run, id string, want task.State, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w := r.Watch()
	defer w.Close()
	for {
		st, err := r.State()
		if err != nil {
			return err
		}
		if t := st.Tasks[id]; t != nil && t.Status == want {
			return nil
		}
		if err := w.Wait(ctx); err != nil {
			return fmt.Errorf("task %s never became %s", id, want)
		}
	}
}

type rssResult struct {
	mb       float64
	ms       float64
	messages int
}

// inboxRSS sends c.messages messages to one task through the library (16
// goroutines, group commit), then runs `crew inbox --json` for that task
// once and returns its peak resident set size (getrusage(2) ru_maxrss) and
// how many messages it printed.
func inboxRSS(tmp string, c config) (rssResult, error) {
	dir := filepath.Join(tmp, "rss")
	r, err := newRun(dir, "rss", "m1")
	if err != nil {
		return rssResult{}, err
	}
	kinds := []string{events.KindSteer, events.KindFollowUp, events.KindSteer, events.KindNudge}
	if err := parallel(groupWriters, c.messages, func(i int) error {
		k := kinds[i%len(kinds)]
		_, err := r.Send(context.Background(), run.SendOptions{Kind: k, Task: "m1", From: run.Leader, Body: body(k, i, 200)})
		return err
	}); err != nil {
		return rssResult{}, err
	}
	r.Sync() // measure a run at rest: every projection written
	env := crewEnv(filepath.Join(dir, ".crew"), "rss")
	// The peak is measured by a fresh process of this program (see
	// peakRSS): a child started straight from this one would report this
	// process's own peak, which the generation above made large.
	self, err := os.Executable()
	if err != nil {
		return rssResult{}, err
	}
	cmd, stderr := command(self, env, append([]string{peakRSSFlag, c.crew}, "inbox", "--task", "m1", "--json")...)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return rssResult{}, fmt.Errorf("crew inbox: %v: %s", err, stderr)
	}
	var res struct {
		MaxRSSKiB int64   `json:"maxrss_kib"`
		Lines     int     `json:"lines"`
		Ms        float64 `json:"ms"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return rssResult{}, fmt.Errorf("peak memory of crew inbox: %v: %s", err, out.Bytes())
	}
	if res.Lines != c.messages {
		return rssResult{}, fmt.Errorf("crew inbox printed %d messages, want %d", res.Lines, c.messages)
	}
	return rssResult{mb: float64(res.MaxRSSKiB) / 1024, ms: res.Ms, messages: res.Lines}, nil
}

// peakRSSFlag, as crewbench's first argument, makes it run the command
// that follows, count the lines it prints and print, as JSON, its peak
// resident set size (getrusage(2) ru_maxrss, KiB on Linux), the lines and
// its wall time. It is a separate process because Linux carries a
// parent's peak over to a child it starts with vfork (Go's os/exec does):
// the child's ru_maxrss is at least its parent's, so the parent must be
// small.
const peakRSSFlag = "-peak-rss-of"

// peakRSS is crewbench -peak-rss-of COMMAND [ARG...].
func peakRSS(args []string) error {
	cmd := exec.Command(args[0], args[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	lines := 0
	buf := make([]byte, 64<<10)
	for {
		n, err := out.Read(buf)
		lines += bytes.Count(buf[:n], []byte{'\n'})
		if err != nil {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%v: %s", err, stderr.Bytes())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return fmt.Errorf("no rusage on this platform")
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"maxrss_kib": ru.Maxrss, "lines": lines, "ms": float64(time.Since(start).Microseconds()) / 1000,
	})
}
