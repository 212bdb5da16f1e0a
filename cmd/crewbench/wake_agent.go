package main

// wake_agent_ms: how soon an idle Claude Code session would be woken.
// crew hook claude wait (an asyncRewake hook) waits for the worker's
// mail; the session wakes when it exits 2 with the delivery. Measured
// from the steer's return to that exit, as wake_p50_ms is from
// Respond's return to a blocked crew ask --wait printing.

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
)

// wakeAgentResult holds wake_agent_ms.
type wakeAgentResult struct {
	p50, p99, max float64
	early         int // samples where the hook had exited before the steer returned (counted as 0)
}

// benchWakeAgent measures wake_agent_ms and adds its rows.
func benchWakeAgent(tmp string, c config, res *result, rows []row) ([]row, error) {
	step("%d wake-ups of a blocked crew hook claude wait", c.wake)
	w, err := wakeAgent(tmp, c)
	if err != nil {
		return rows, err
	}
	res.WakeAgentP50ms, res.WakeAgentP99ms = w.p50, w.p99
	return append(rows,
		row{"wake_agent_ms", "steer returns → a blocked `crew hook claude wait` (the asyncRewake hook) has exited 2 with it: p50 / p99", f2(w.p50) + " / " + f2(w.p99), "≤ 5 / ≤ 20",
			fmt.Sprintf("%d samples; max %.2f ms; the steer is marked delivered (an fsync) before the hook exits", c.wake, w.max)}), nil
}

// wakeAgent takes c.wake samples (after 5 not counted): a crew hook
// claude wait process for task w1 is started and left to block, a steer
// is sent through the library (as the leader's crew steer would), and
// the time from the steer's return to the process's exit is taken. The
// steer is acknowledged after each sample, so every sample's open list
// is the same.
func wakeAgent(tmp string, c config) (wakeAgentResult, error) {
	dir := filepath.Join(tmp, "wake-agent")
	r, err := newRun(dir, "wake", "w1")
	if err != nil {
		return wakeAgentResult{}, err
	}
	env := append(crewEnv(filepath.Join(dir, ".crew"), "wake"), "CREW_TASK=w1", "TMPDIR="+dir)
	ctx := context.Background()
	var lat []float64
	var res wakeAgentResult
	for i := range c.wake + 5 {
		cmd, stderr := command(c.crew, env, "hook", "claude", "wait")
		cmd.Stdin = strings.NewReader(`{"hook_event_name":"Stop","session_id":"bench","stop_hook_active":false}`)
		if err := cmd.Start(); err != nil {
			return res, err
		}
		exited := make(chan time.Time, 1)
		var werr error
		go func() {
			werr = cmd.Wait()
			exited <- time.Now()
		}()
		time.Sleep(30 * time.Millisecond) // the hook is now blocked in its wait
		m, err := r.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "w1", From: run.Leader, Body: body("steer", i, 80)})
		if err != nil {
			cmd.Process.Kill()
			return res, err
		}
		sent := time.Now()
		t := <-exited
		var ee *exec.ExitError
		if !errors.As(werr, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), m.ID) {
			return res, fmt.Errorf("wake sample %d: crew hook claude wait: %v, want exit 2 with the steer: %s", i, werr, stderr)
		}
		if err := r.Acknowledge(ctx, "w1", []string{m.ID}, false, ""); err != nil {
			return res, err
		}
		if i < 5 {
			continue // warm-up
		}
		d := t.Sub(sent)
		if d < 0 {
			res.early++
			d = 0
		}
		lat = append(lat, float64(d.Microseconds())/1000)
	}
	res.p50, res.p99, res.max = percentile(lat, 50), percentile(lat, 99), percentile(lat, 100)
	return res, nil
}
