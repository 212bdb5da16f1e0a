package main

// The dashboard of crew serve (package web): how long a committed event
// takes to show in a page open in Chromium, and how long the board of a
// large run takes to serve.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
	"github.com/crew-dev/crew/web"
)

// uiTasks is how many tasks the run of ui_board_ms has.
const uiTasks = 1000

// errNoChromium is returned by uiUpdate when no Chromium is installed.
var errNoChromium = errors.New("no Chromium found (chromium, chromium-browser, google-chrome or $CREW_CHROMIUM)")

// serveRun starts a dashboard of r's state root and returns its base
// URL, a client holding its token's cookie, and a function that stops
// it.
func serveRun(r *run.Run) (base, token string, client *http.Client, stop func(), err error) {
	srv := httptest.NewUnstartedServer(nil)
	hosts, err := web.Hosts(srv.Listener.Addr().String())
	if err != nil {
		return "", "", nil, nil, err
	}
	token = web.NewToken()
	s, err := web.New(r.Root(), web.Options{Hosts: hosts, Token: token})
	if err != nil {
		return "", "", nil, nil, err
	}
	srv.Config.Handler = s
	srv.Start()
	// As crew serve does: the server reaps lost workers beside serving.
	ctx, cancel := context.WithCancel(context.Background())
	reaped := make(chan struct{})
	go func() { s.Supervise(ctx, 0, nil); close(reaped) }()
	stop = func() { cancel(); <-reaped; srv.Close() }
	base = "http://" + srv.Listener.Addr().String()
	jar, _ := cookiejar.New(nil)
	client = &http.Client{Jar: jar}
	resp, err := client.Get(base + "/?token=" + token)
	if err != nil {
		stop()
		return "", "", nil, nil, err
	}
	resp.Body.Close()
	return base, token, client, stop, nil
}

// uiBoard returns the median time to serve the board (GET /runs/RUN/,
// the whole response read) of a run of uiTasks tasks and about c.events
// events, in milliseconds: the large run (big) with tasks added to make
// uiTasks, or, when the large part did not run, a run generated alike.
func uiBoard(tmp string, c config, big *large) (ms float64, n int64, err error) {
	var r *run.Run
	if big != nil {
		r = big.run
		st, err := r.TaskState()
		if err != nil {
			return 0, 0, err
		}
		step("  adding %d tasks to the large run", uiTasks-len(st.Tasks))
		if err := addTasks(r, taskIDs("u%04d", uiTasks-len(st.Tasks))); err != nil {
			return 0, 0, err
		}
	} else {
		tasks := taskIDs("t%02d", largeTasks)
		if r, err = newRun(filepath.Join(tmp, "ui-board"), "large", tasks...); err != nil {
			return 0, 0, err
		}
		step("  generating %d events", c.events)
		if _, _, err := fill(r, tasks, int64(c.events)); err != nil {
			return 0, 0, err
		}
		if err := addTasks(r, taskIDs("u%04d", uiTasks-largeTasks)); err != nil {
			return 0, 0, err
		}
	}
	r.Sync()
	st, err := r.TaskState()
	if err != nil {
		return 0, 0, err
	}
	base, _, client, stop, err := serveRun(r)
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	ms, err = median3(c.reps, func() (float64, error) { return getBoard(client, base+"/runs/"+r.ID()+"/") })
	return ms, st.Seq, err
}

// addTasks adds the tasks to r and starts them, from 16 goroutines.
func addTasks(r *run.Run, tasks []string) error {
	ctx := context.Background()
	return parallel(16, len(tasks), func(i int) error {
		if _, err := r.AddTask(ctx, tasks[i], state.TaskSpec{Title: "bench task " + tasks[i]}, run.Leader); err != nil {
			return err
		}
		_, err := r.Transition(ctx, tasks[i], task.Start, tasks[i], "", nil)
		return err
	})
}

// chromiumPath finds a Chromium to drive, as the tests of package web do.
func chromiumPath() string {
	if p := os.Getenv("CREW_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// observe records, in the page, the time (ms since the epoch, from the
// browser's clock) at which each question's text first shows on t1's
// card: window.crewSeen[body].
const observe = `window.crewSeen = {};
new MutationObserver(() => {
  const q = document.querySelector("#task-t1 .question pre");
  if (q && !(q.textContent in window.crewSeen)) window.crewSeen[q.textContent] = performance.timeOrigin + performance.now();
}).observe(document.getElementById("main"), {childList: true, subtree: true, characterData: true});
true`

// uiUpdate opens the board of a run of three tasks in headless Chromium
// and, n times, has t1 ask a question through the library: the sample
// is from Ask's return (the event is durable) to the moment the page's
// DOM shows the question (a MutationObserver's clock), in milliseconds.
// The leader's response after each sample is not measured.
func uiUpdate(tmp string, n int) ([]float64, error) {
	path := chromiumPath()
	if path == "" {
		return nil, errNoChromium
	}
	r, err := newRun(filepath.Join(tmp, "ui-update"), "live", "t1", "t2", "t3")
	if err != nil {
		return nil, err
	}
	r.SetAsync(false)
	base, token, _, stop, err := serveRun(r)
	if err != nil {
		return nil, err
	}
	defer stop()
	bctx, cancel, err := openPage(path, base+"/runs/live/?token="+token, observe)
	if err != nil {
		return nil, err
	}
	defer cancel()
	ctx := context.Background()
	var samples []float64
	for i := range n {
		q := fmt.Sprintf("question %d", i)
		if _, _, err := r.Ask(ctx, run.SendOptions{Task: "t1", From: "t1", Body: q}, false); err != nil {
			return nil, err
		}
		committed := float64(time.Now().UnixNano()) / 1e6
		seen, err := chromedp.Run(bctx, chromedp.Poll[float64](fmt.Sprintf(`window.crewSeen[%q] || false`, q)))
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w", i, err)
		}
		samples = append(samples, max(seen-committed, 0))
		if _, err := r.Send(ctx, run.SendOptions{Kind: events.KindResponse, Task: "t1", From: run.Leader, Body: "ok"}); err != nil {
			return nil, err
		}
		if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`.column.running #task-t1`))); err != nil {
			return nil, err
		}
	}
	return samples, nil
}

// uiReapSamples is how many lost workers ui_reap_ms kills, at most.
const uiReapSamples = 20

// observeFailed records, in the page, the time (ms since the epoch,
// from the browser's clock) at which each task's card first shows in
// the failed column: window.crewFailed[task].
const observeFailed = `window.crewFailed = {};
new MutationObserver(() => {
  document.querySelectorAll(".column.failed .card").forEach(c => {
    if (!(c.dataset.task in window.crewFailed)) window.crewFailed[c.dataset.task] = performance.timeOrigin + performance.now();
  });
}).observe(document.getElementById("main"), {childList: true, subtree: true});
true`

// uiReap opens the board of a run in headless Chromium and, n times,
// starts a worker with crew spawn (crewBin, real processes), kills the
// crew spawn and then the worker (SIGKILL), and samples the time from
// the second kill to the moment the page's DOM shows the task in the
// failed column, in milliseconds: crew serve's reaper (every
// web.ReapEvery) and the board's update, with no command run.
func uiReap(tmp, crewBin string, n int) ([]float64, error) {
	path := chromiumPath()
	if path == "" {
		return nil, errNoChromium
	}
	dir := filepath.Join(tmp, "ui-reap")
	r, err := newRun(dir, "reap")
	if err != nil {
		return nil, err
	}
	r.SetAsync(false)
	base, token, _, stop, err := serveRun(r)
	if err != nil {
		return nil, err
	}
	defer stop()
	bctx, cancel, err := openPage(path, base+"/runs/reap/?token="+token, observeFailed)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var samples []float64
	for i := range n {
		id := fmt.Sprintf("k%02d", i)
		if _, err := r.AddTask(context.Background(), id, state.TaskSpec{Title: "lost worker " + id}, run.Leader); err != nil {
			return nil, err
		}
		killed, err := spawnAndKill(r, crewBin, dir, id)
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w", i, err)
		}
		seen, err := chromedp.Run(bctx, chromedp.Poll[float64](fmt.Sprintf(`window.crewFailed[%q] || false`, id)))
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w", i, err)
		}
		samples = append(samples, max(seen-killed, 0))
	}
	return samples, nil
}

// openPage opens url in a new headless Chromium at path, waits for its
// live stream, and evaluates script in it.
func openPage(path, url, script string) (context.Context, func(), error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	cancel := func() { bcancel(); acancel() }
	err := chromedp.Do(bctx, chromedp.Navigate(url),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Poll[bool](`document.getElementById("live").textContent === "live"`)(ctx, t)
			return err
		}))
	if err == nil {
		_, err = chromedp.Run(bctx, chromedp.Evaluate[bool](script))
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return bctx, cancel, nil
}

// spawnAndKill starts crew spawn for task id of r (its state root in
// dir) with a worker that sleeps, waits for the worker's start to be
// recorded, kills the crew spawn and then the worker, and returns the
// time of the second kill in ms since the epoch.
func spawnAndKill(r *run.Run, crewBin, dir, id string) (float64, error) {
	cmd := exec.Command(crewBin, "spawn", id, "--", "sleep", "600")
	cmd.Env = append(os.Environ(), "CREW_DIR="+dir, "CREW_RUN="+r.ID())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var w *state.Worker
	for end := time.Now().Add(time.Minute); w == nil; time.Sleep(10 * time.Millisecond) {
		st, err := r.TaskState()
		if err != nil {
			return 0, err
		}
		if t, err := st.Task(id); err == nil && t.Live() != nil {
			w = t.Live()
		} else if time.Now().After(end) {
			return 0, fmt.Errorf("crew spawn %s recorded no worker in a minute: %s", id, out.String())
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		return 0, err
	}
	cmd.Wait() // no zombie left: crew spawn is gone
	if err := syscall.Kill(w.PID, syscall.SIGKILL); err != nil {
		return 0, err
	}
	return float64(time.Now().UnixNano()) / 1e6, nil
}

// benchUI measures the dashboard's rows: ui_update_p50_ms,
// ui_update_p99_ms and ui_reap_ms (each left out of the table and the
// JSON, saying why on stderr, without Chromium) and ui_board_ms.
func benchUI(tmp string, c config, big *large, res *result, rows []row) ([]row, error) {
	step("%d updates of a board open in Chromium", c.wake)
	samples, err := uiUpdate(tmp, c.wake)
	switch {
	case errors.Is(err, errNoChromium):
		step("leaving out ui_update_p50_ms and ui_update_p99_ms (not measured): %v", err)
	case err != nil:
		return nil, err
	default:
		early := 0
		for _, s := range samples {
			if s == 0 {
				early++
			}
		}
		p50, p99 := median(samples), percentile(samples, 99)
		res.UIUpdateP50ms, res.UIUpdateP99ms = &p50, &p99
		rows = append(rows,
			row{"ui_update_p50_ms", "a question committed (Ask returns) → the board open in Chromium shows it (median)", f2(p50), "(context)",
				fmt.Sprintf("%d samples; %d shown before Ask returned (counted as 0)", len(samples), early)},
			row{"ui_update_p99_ms", "the same, 99th percentile", f2(p99), "≤ 100", ""})
	}
	n := min(c.wake, uiReapSamples)
	step("%d lost workers (crew spawn and its worker killed) on a board open in Chromium", n)
	samples, err = uiReap(tmp, c.crew, n)
	switch {
	case errors.Is(err, errNoChromium):
		step("leaving out ui_reap_ms (not measured): %v", err)
	case err != nil:
		return nil, err
	default:
		p99 := percentile(samples, 99)
		res.UIReapMs = &p99
		rows = append(rows, row{"ui_reap_ms", "a worker and its crew spawn killed (SIGKILL) → the board open in Chromium shows the task failed, no command run (p99)", f0(p99),
			fmt.Sprintf("≤ 3000 (reaper every %s)", web.ReapEvery), fmt.Sprintf("%d samples; median %s ms", len(samples), f0(median(samples)))})
	}
	step("the board of a run of %d tasks", uiTasks)
	if res.UIBoardMs, res.UIBoardEvents, err = uiBoard(tmp, c, big); err != nil {
		return nil, err
	}
	rows = append(rows, row{"ui_board_ms", fmt.Sprintf("GET the board of a run of %d tasks and %d events (crew serve)", uiTasks, res.UIBoardEvents),
		f2(res.UIBoardMs), "≤ 200", "in process over loopback HTTP, median"})
	return rows, nil
}

// getBoard GETs a run's board page at url, reading it whole, and returns
// how long that took, in milliseconds; a status other than 200 is an
// error.
func getBoard(client *http.Client, url string) (float64, error) {
	start := time.Now()
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET the board: %s", resp.Status)
	}
	return float64(time.Since(start).Microseconds()) / 1000, err
}
