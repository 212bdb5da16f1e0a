package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	natsstore "github.com/crew-dev/crew/store/nats"
	"github.com/crew-dev/crew/task"
)

// HerdFigures are the figures of a crew of many waiting workers (issue
// "A thousand agents on one machine"): the herd part, on the file store
// and on NATS.
type HerdFigures struct {
	HerdWaiters        int     `json:"herd_waiters"` // workers blocked in crew ask --wait
	NATSHerdWaiters    int     `json:"nats_herd_waiters"`
	HerdRatio          float64 `json:"herd_ratio"`            // crew respond with the waiters ÷ with none (medians of 20)
	HerdRespondMs      float64 `json:"herd_respond_ms"`       // crew respond with the waiters, median
	HerdRespondAloneMs float64 `json:"herd_respond_alone_ms"` // crew respond with none waiting, median
	HerdRespondAfterMs float64 `json:"herd_respond_after_ms"` // the same once every waiter is answered: a longer log, none waiting
	HerdRatioSameLog   float64 `json:"herd_ratio_same_log"`   // with the waiters ÷ after: the herd alone, the log's length the same
	IdleWaitersCPU     float64 `json:"idle_waiters_cpu"`      // CPU-seconds per second the idle waiters use together
	FanoutWakeP50ms    float64 `json:"fanout_wake_p50_ms"`    // Respond returns → that waiter printed, each waiter answered in turn
	FanoutWakeP99ms    float64 `json:"fanout_wake_p99_ms"`
	AskStartRatio      float64 `json:"ask_start_ratio"` // the last asks started (all others waiting) ÷ the first, medians of 5
	AskStartFirstMs    float64 `json:"ask_start_first_ms"`

	NATSHerdRatio        float64   `json:"nats_herd_ratio"`
	NATSHerdRatioSameLog float64   `json:"nats_herd_ratio_same_log"`
	NATSHerdRespondMs    []float64 `json:"nats_herd_respond_ms"` // alone, with the waiters, after
	NATSIdleWaitersCPU   float64   `json:"nats_idle_waiters_cpu"`
	NATSIdleServerCPU    float64   `json:"nats_idle_server_cpu"` // the embedded nats-server's (the bench process's) CPU meanwhile
	NATSFanoutWakeP50ms  float64   `json:"nats_fanout_wake_p50_ms"`
	NATSFanoutWakeP99ms  float64   `json:"nats_fanout_wake_p99_ms"`
	NATSAskStartRatio    float64   `json:"nats_ask_start_ratio"`

	Inbox100kMs float64 `json:"inbox_100k_ms,omitempty"` // crew inbox --json over 100,000 unread (the rss part)

	// The curves: whole crew processes, medians of 5.
	RunListMs     map[string]float64 `json:"run_list_ms,omitempty"`  // crew run list over N runs, by N
	TaskListMs    map[string]float64 `json:"task_list_ms,omitempty"` // crew task list of a run of N tasks, by N
	RunList1kMs   float64            `json:"run_list_1k_runs_ms"`
	TaskList10kMs float64            `json:"task_list_10k_ms"`

	// A run of N tasks, each started by its own agent (N mail
	// directories), 10 of them with a report open: by N, and at 1,000.
	TaskAddMs     map[string]float64 `json:"task_add_ms,omitempty"` // crew task add (whole process)
	PendingMs     map[string]float64 `json:"pending_ms,omitempty"`  // crew pending for the leader (10 open)
	SteerMs       map[string]float64 `json:"steer_ms,omitempty"`    // crew steer: a commit delivering to one of N mail dirs
	BoardMs       map[string]float64 `json:"board_ms,omitempty"`    // GET the dashboard's board (crew serve, in process)
	InboxMs       map[string]float64 `json:"inbox_ms,omitempty"`    // crew inbox --peek of one worker (nothing open)
	TaskAdd1kMs   float64            `json:"task_add_1k_ms"`
	Pending1kMs   float64            `json:"pending_1k_ms"`
	Steer1kDirsMs float64            `json:"steer_1k_dirs_ms"`
	Board1kMs     float64            `json:"board_1k_ms"`
	Inbox1kMs     float64            `json:"worker_inbox_1k_ms"`
}

// herdSamples is how many responds are timed, with and without waiters.
const herdSamples = 20

// herd is the herd part: n workers blocked in crew ask --wait on the file
// store, then on one nats-server.
func herd(tmp string, c config, n, nNATS int, idle time.Duration) (HerdFigures, []row, error) {
	var f HerdFigures
	f.HerdWaiters, f.NATSHerdWaiters = n, nNATS
	dir := filepath.Join(tmp, "herd")
	r, err := newRun(dir, "herd")
	if err != nil {
		return f, nil, err
	}
	env := crewEnv(filepath.Join(dir, ".crew"), "herd")
	step("herd: %d workers blocked in crew ask --wait (file store)", n)
	h, err := herdOn(c, r, env, n, idle)
	if err != nil {
		return f, nil, err
	}
	f.HerdRatio, f.HerdRespondMs, f.HerdRespondAloneMs, f.HerdRespondAfterMs = h.ratio, h.with, h.alone, h.after
	f.HerdRatioSameLog = h.with / h.after
	f.IdleWaitersCPU, f.FanoutWakeP50ms, f.FanoutWakeP99ms = h.idleCPU, h.p50, h.p99
	f.AskStartRatio, f.AskStartFirstMs = h.askRatio, h.askFirst

	step("herd: %d workers blocked in crew ask --wait (NATS)", nNATS)
	srv, err := natstest.Start(filepath.Join(tmp, "herd-nats"))
	if err != nil {
		return f, nil, err
	}
	defer srv.Shutdown()
	s, err := natsstore.Dial(context.Background(), srv.ClientURL(), natsstore.Options{})
	if err != nil {
		return f, nil, err
	}
	defer s.Close()
	nr, err := run.NewRoot(s).Create(run.CreateOptions{ID: "herd"})
	if err != nil {
		return f, nil, err
	}
	nh, err := herdOn(c, nr, append(os.Environ(), "CREW_STORE="+srv.ClientURL(), "CREW_RUN=herd"), nNATS, idle)
	if err != nil {
		return f, nil, err
	}
	f.NATSHerdRespondMs = []float64{nh.alone, nh.with, nh.after}
	f.NATSHerdRatioSameLog = nh.with / nh.after
	f.NATSIdleServerCPU = nh.selfCPU
	f.NATSHerdRatio, f.NATSIdleWaitersCPU, f.NATSFanoutWakeP50ms, f.NATSFanoutWakeP99ms, f.NATSAskStartRatio = nh.ratio, nh.idleCPU, nh.p50, nh.p99, nh.askRatio

	w := fmt.Sprintf("%d workers blocked in `crew ask --wait`", n)
	rows := []row{
		{"herd_ratio", "`crew respond` with " + w + " ÷ with none (medians of 20)", f2(f.HerdRatio), "≤ 1.5", fmt.Sprintf("%.1f / %.1f ms (%.1f ms after, none waiting)", f.HerdRespondMs, f.HerdRespondAloneMs, f.HerdRespondAfterMs)},
		{"idle_waiters_cpu", w + ", idle: CPU-seconds a second, all of them", fmt.Sprintf("%.4f", f.IdleWaitersCPU), "≤ 0.02", ""},
		{"fanout_wake_p99_ms", "each of " + w + " answered in turn: Respond returns → it printed (p99)", f2(f.FanoutWakeP99ms), "≤ 50", "p50 " + f2(f.FanoutWakeP50ms)},
		{"herd_ratio_same_log", "the same ÷ `crew respond` once every waiter is answered (the log as long, none waiting)", f2(f.HerdRatioSameLog), "(context)", ""},
		{"ask_start_ratio", "starting the last asks while the others wait ÷ the first (medians of 5)", f2(f.AskStartRatio), "(context)", fmt.Sprintf("first %.1f ms", f.AskStartFirstMs)},
		{"nats_herd_ratio", fmt.Sprintf("herd_ratio on NATS, %d waiters", nNATS), f2(f.NATSHerdRatio), "≤ 1.5", fmt.Sprintf("%.1f / %.1f ms (%.1f ms after, none waiting)", nh.with, nh.alone, nh.after)},
		{"nats_herd_ratio_same_log", "herd_ratio_same_log on NATS", f2(f.NATSHerdRatioSameLog), "(context)", ""},
		{"nats_idle_waiters_cpu", "idle_waiters_cpu on NATS", fmt.Sprintf("%.4f", f.NATSIdleWaitersCPU), "≤ 0.02", ""},
		{"nats_idle_server_cpu", "the nats-server's CPU-seconds a second meanwhile (it runs in the bench's process: not in idle_waiters_cpu)", fmt.Sprintf("%.4f", f.NATSIdleServerCPU), "(context)", ""},
		{"nats_fanout_wake_p99_ms", "fanout_wake_p99_ms on NATS", f2(f.NATSFanoutWakeP99ms), "≤ 50", "p50 " + f2(f.NATSFanoutWakeP50ms)},
		{"nats_ask_start_ratio", "ask_start_ratio on NATS", f2(f.NATSAskStartRatio), "(context)", ""},
	}
	return f, rows, nil
}

type herdResult struct {
	alone, with, ratio float64
	after              float64 // alone, once every waiter is answered
	idleCPU            float64
	selfCPU            float64 // the bench process's own meanwhile (on NATS: the server's)
	p50, p99           float64
	askFirst, askRatio float64
}

// asker is a crew ask --wait process.
type asker struct {
	task    string
	cmd     *exec.Cmd
	out     bytes.Buffer
	stderr  bytes.Buffer
	first   time.Time // its first output
	arrived chan struct{}
	done    chan error
}

func startAsk(c config, env []string, id string) (*asker, error) {
	a := &asker{task: id, arrived: make(chan struct{}), done: make(chan error, 1)}
	a.cmd = exec.Command(c.crew, "ask", "--wait", "question of "+id)
	a.cmd.Env = append(env, "CREW_TASK="+id)
	a.cmd.Stderr = &a.stderr
	out, err := a.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := a.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := out.Read(buf)
			if k > 0 && a.first.IsZero() {
				a.first = time.Now()
				close(a.arrived)
			}
			a.out.Write(buf[:k])
			if err != nil {
				break
			}
		}
		if a.first.IsZero() {
			close(a.arrived)
		}
		a.done <- a.cmd.Wait()
	}()
	return a, nil
}

// answerToken is the body of the answer to task id: each waiter must
// print its own, once.
func answerToken(id string) string { return "answer-for-" + id + "-only" }

// check reports whether a printed its own answer exactly once and exited 0.
func (a *asker) check() error {
	if err := <-a.done; err != nil {
		return fmt.Errorf("crew ask --wait of %s: %v: %s", a.task, err, a.stderr.Bytes())
	}
	if k := strings.Count(a.out.String(), answerToken(a.task)); k != 1 {
		return fmt.Errorf("crew ask --wait of %s printed its answer %d times: %q", a.task, k, a.out.String())
	}
	return nil
}

// awaitWaiting waits until the task of a's ask is waiting in r, woken
// by the leader's wake-ups (a question concerns the leader). An ask that
// printed or exited first, or 2 minutes, is an error.
func awaitWaiting(r *run.Run, a *asker) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-a.arrived:
			cancel()
		case <-ctx.Done():
		}
	}()
	t0 := time.Now()
	w := r.Watch(state.Leader)
	defer w.Close()
	for {
		st, err := r.TaskState()
		if err != nil {
			return err
		}
		if t := st.Tasks[a.task]; t != nil && t.Status == task.Waiting {
			return nil
		}
		if err := w.Wait(ctx); err != nil {
			select {
			case <-a.arrived:
				return fmt.Errorf("task %s: its ask printed or exited %v after it started, before its task was seen waiting: %v", a.task, time.Since(t0).Round(time.Millisecond), a.check())
			default:
				return fmt.Errorf("task %s was not seen waiting in %v", a.task, time.Since(t0).Round(time.Millisecond))
			}
		}
	}
}

// addHerdTasks adds and starts tasks ids in r.
func addHerdTasks(r *run.Run, ids []string) error {
	ctx := context.Background()
	for _, t := range ids {
		if _, err := r.AddTask(ctx, t, state.TaskSpec{Title: "herd task " + t}, run.Leader); err != nil {
			return err
		}
		if _, err := r.Transition(ctx, t, task.Start, t, "", nil); err != nil {
			return err
		}
	}
	r.Sync()
	return nil
}

// timedRespond times herdSamples crew respond processes, each to an ask
// started for it: the median in milliseconds.
func timedRespond(c config, r *run.Run, env []string, prefix string) (float64, error) {
	var ms []float64
	for i := range herdSamples {
		id := fmt.Sprintf("%s%02d", prefix, i)
		a, err := startAsk(c, env, id)
		if err != nil {
			return 0, err
		}
		if err := awaitWaiting(r, a); err != nil {
			return 0, err
		}
		d, err := timeProcess(c.crew, env, "respond", id, answerToken(id))
		if err != nil {
			return 0, err
		}
		if err := a.check(); err != nil {
			return 0, err
		}
		ms = append(ms, d)
	}
	return median(ms), nil
}

func herdOn(c config, r *run.Run, env []string, n int, idle time.Duration) (herdResult, error) {
	var h herdResult
	var ids, base, more, last []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("h%04d", i))
	}
	for i := range herdSamples {
		base = append(base, fmt.Sprintf("b%02d", i))
		more = append(more, fmt.Sprintf("c%02d", i))
		last = append(last, fmt.Sprintf("d%02d", i))
	}
	if err := addHerdTasks(r, append(append(append(base, more...), last...), ids...)); err != nil {
		return h, err
	}
	var err error
	if h.alone, err = timedRespond(c, r, env, "b"); err != nil {
		return h, err
	}
	waiters := make([]*asker, 0, n)
	defer func() {
		for _, a := range waiters {
			a.cmd.Process.Kill()
		}
	}()
	var starts []float64
	for _, id := range ids {
		t := time.Now()
		a, err := startAsk(c, env, id)
		if err != nil {
			return h, err
		}
		waiters = append(waiters, a)
		if err := awaitWaiting(r, a); err != nil {
			return h, err
		}
		starts = append(starts, float64(time.Since(t).Microseconds())/1000)
	}
	k := min(5, len(starts))
	h.askFirst = median(starts[:k])
	h.askRatio = median(starts[len(starts)-k:]) / h.askFirst
	time.Sleep(time.Second) // the last ones settle in their wait
	before, err := cpuOf(waiters)
	if err != nil {
		return h, err
	}
	self := selfCPU()
	t := time.Now()
	time.Sleep(idle)
	after, err := cpuOf(waiters)
	if err != nil {
		return h, err
	}
	h.idleCPU = (after - before) / time.Since(t).Seconds()
	h.selfCPU = (selfCPU() - self) / time.Since(t).Seconds()
	if h.with, err = timedRespond(c, r, env, "c"); err != nil {
		return h, err
	}
	h.ratio = h.with / h.alone
	var lat []float64
	for _, a := range waiters {
		if _, err := r.Send(context.Background(), run.SendOptions{Kind: events.KindResponse, Task: a.task, From: run.Leader, Body: answerToken(a.task)}); err != nil {
			return h, err
		}
		responded := time.Now()
		<-a.arrived
		if err := a.check(); err != nil {
			return h, err
		}
		lat = append(lat, max(0, float64(a.first.Sub(responded).Microseconds())/1000))
	}
	waiters = nil
	h.p50, h.p99 = percentile(lat, 50), percentile(lat, 99)
	h.after, err = timedRespond(c, r, env, "d")
	return h, err
}

// selfCPU is the CPU time (seconds) this process has used so far, as
// cpuOf counts it.
func selfCPU() float64 {
	files, _ := filepath.Glob("/proc/self/task/*/schedstat")
	var ns int64
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			if fields := strings.Fields(string(b)); len(fields) > 0 {
				v, _ := strconv.ParseInt(fields[0], 10, 64)
				ns += v
			}
		}
	}
	return float64(ns) / 1e9
}

// cpuOf is the CPU time (seconds) the processes have used so far: the
// sum over their threads of /proc/PID/task/TID/schedstat's first field
// (nanoseconds on a CPU), exact where /proc/PID/stat counts ticks.
func cpuOf(as []*asker) (float64, error) {
	var ns int64
	for _, a := range as {
		files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", a.cmd.Process.Pid))
		if err != nil || len(files) == 0 {
			return 0, fmt.Errorf("idle waiters' CPU: no /proc/%d/task/*/schedstat", a.cmd.Process.Pid)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // a thread gone
			}
			fields := strings.Fields(string(b))
			if len(fields) > 0 {
				v, _ := strconv.ParseInt(fields[0], 10, 64)
				ns += v
			}
		}
	}
	return float64(ns) / 1e9, nil
}

// listCurves times crew run list over 10, 100 and 1,000 runs, and crew
// task list of a run of 10, 100, 1,000 and 10,000 tasks.
func listCurves(tmp string, c config, f *HerdFigures) ([]row, error) {
	f.RunListMs, f.TaskListMs = map[string]float64{}, map[string]float64{}
	dir := filepath.Join(tmp, "runs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	root, err := run.Init(dir, crew.PrivatePerm)
	if err != nil {
		return nil, err
	}
	made := 0
	for _, n := range []int{10, 100, 1000} {
		step("crew run list over %d runs", n)
		for ; made < n; made++ {
			if _, err := root.Create(run.CreateOptions{ID: fmt.Sprintf("run%04d", made), Dir: dir}); err != nil {
				return nil, err
			}
		}
		ms, err := medianProcess(c, crewEnv(filepath.Join(dir, ".crew"), ""), "run", "list")
		if err != nil {
			return nil, err
		}
		f.RunListMs[strconv.Itoa(n)] = ms
	}
	for _, n := range []int{10, 100, 1000, 10000} {
		step("crew task list of %d tasks", n)
		d := filepath.Join(tmp, fmt.Sprintf("tasks%d", n))
		id := fmt.Sprintf("t%d", n)
		r, err := newRun(d, id)
		if err != nil {
			return nil, err
		}
		ctx := context.Background()
		if err := parallel(groupWriters, n, func(i int) error {
			_, err := r.AddTask(ctx, fmt.Sprintf("task%05d", i), state.TaskSpec{Title: "listed task"}, run.Leader)
			return err
		}); err != nil {
			return nil, err
		}
		r.Sync()
		ms, err := medianProcess(c, crewEnv(filepath.Join(d, ".crew"), id), "task", "list")
		if err != nil {
			return nil, err
		}
		f.TaskListMs[strconv.Itoa(n)] = ms
	}
	f.RunList1kMs, f.TaskList10kMs = f.RunListMs["1000"], f.TaskListMs["10000"]
	if err := runCurves(tmp, c, f); err != nil {
		return nil, err
	}
	curve := func(m map[string]float64, ns ...string) string {
		var s []string
		for _, n := range ns {
			s = append(s, fmt.Sprintf("%s: %.1f", n, m[n]))
		}
		return strings.Join(s, ", ")
	}
	return []row{
		{"run_list_1k_runs_ms", "`crew run list` over 1,000 runs (whole process, median of 5)", f1(f.RunList1kMs), "flat", curve(f.RunListMs, "10", "100", "1000")},
		{"task_list_10k_ms", "`crew task list` of a run of 10,000 tasks (whole process, median of 5)", f1(f.TaskList10kMs), "flat", curve(f.TaskListMs, "10", "100", "1000", "10000")},
		{"task_add_1k_ms", "`crew task add` in a run of 1,000 tasks (whole process, median of 5)", f1(f.TaskAdd1kMs), "flat", curve(f.TaskAddMs, "10", "100", "1000")},
		{"pending_1k_ms", "`crew pending` for the leader of 1,000 tasks, 10 reports open (whole process, median of 5)", f1(f.Pending1kMs), "flat", curve(f.PendingMs, "10", "100", "1000")},
		{"steer_1k_dirs_ms", "`crew steer`, a commit delivering a copy, in a run of 1,000 agents' mail directories (whole process, median of 5)", f1(f.Steer1kDirsMs), "flat", curve(f.SteerMs, "10", "100", "1000")},
		{"board_1k_ms", "GET the dashboard's board of a run of 1,000 tasks (crew serve, median of 5)", f1(f.Board1kMs), "flat", curve(f.BoardMs, "10", "100", "1000")},
		{"worker_inbox_1k_ms", "`crew inbox --peek` of one worker of a run of 1,000 tasks, nothing open: what a worker's hook reads (whole process, median of 5)", f1(f.Inbox1kMs), "flat", curve(f.InboxMs, "10", "100", "1000")},
	}, nil
}

// runCurves times, in a run of 10, 100 and 1,000 started tasks (each its
// own agent, so as many mail directories) with 10 reports open: crew task
// add, crew pending for the leader, a worker's crew inbox --peek, crew
// steer (a commit that delivers a copy) and the dashboard's board.
func runCurves(tmp string, c config, f *HerdFigures) error {
	f.TaskAddMs, f.PendingMs, f.SteerMs, f.BoardMs, f.InboxMs = map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, n := range []int{10, 100, 1000} {
		step("crew task add, pending, steer and the board in a run of %d tasks", n)
		d := filepath.Join(tmp, fmt.Sprintf("curve%d", n))
		id := fmt.Sprintf("c%d", n)
		r, err := newRun(d, id)
		if err != nil {
			return err
		}
		ids := taskIDs("w%04d", n)
		if err := addTasks(r, ids); err != nil {
			return err
		}
		for _, t := range ids[:10] {
			if _, err := r.Send(context.Background(), run.SendOptions{Kind: events.KindReport, Task: t, From: t, Body: "report of " + t}); err != nil {
				return err
			}
		}
		r.Sync()
		env := crewEnv(filepath.Join(d, ".crew"), id)
		k := strconv.Itoa(n)
		if f.TaskAddMs[k], err = medianProcessEach(c, env, func(i int) []string { return []string{"task", "add", fmt.Sprintf("added%d", i)} }); err != nil {
			return err
		}
		if f.PendingMs[k], err = medianProcess(c, env, "pending"); err != nil {
			return err
		}
		if f.InboxMs[k], err = medianProcess(c, env, "inbox", "--peek", "--task", ids[n/2]); err != nil {
			return err
		}
		if f.SteerMs[k], err = medianProcessEach(c, env, func(i int) []string { return []string{"steer", ids[n-1-i], "steered"} }); err != nil {
			return err
		}
		base, _, client, stop, err := serveRun(r)
		if err != nil {
			return err
		}
		f.BoardMs[k], err = median3(5, func() (float64, error) { return getBoard(client, base+"/runs/"+id+"/") })
		stop()
		if err != nil {
			return err
		}
	}
	f.TaskAdd1kMs, f.Pending1kMs, f.Steer1kDirsMs, f.Board1kMs, f.Inbox1kMs = f.TaskAddMs["1000"], f.PendingMs["1000"], f.SteerMs["1000"], f.BoardMs["1000"], f.InboxMs["1000"]
	return nil
}

// medianProcess runs crew with args five times and returns the median
// wall time in milliseconds; its output is thrown away.
func medianProcess(c config, env []string, args ...string) (float64, error) {
	return medianProcessEach(c, env, func(int) []string { return args })
}

// medianProcessEach is medianProcess with the arguments of each of the
// five runs given by args(i).
func medianProcessEach(c config, env []string, args func(i int) []string) (float64, error) {
	var ms []float64
	for i := range 5 {
		args := args(i)
		cmd, stderr := command(c.crew, env, args...)
		cmd.Stdout = io.Discard
		t := time.Now()
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("crew %v: %v: %s", args, err, stderr)
		}
		ms = append(ms, float64(time.Since(t).Microseconds())/1000)
	}
	return median(ms), nil
}
