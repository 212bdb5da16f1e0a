package web_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
	"github.com/crew-dev/crew/web"
)

// addPending adds task id to f's run, not started.
func (f *fixture) addPending(t *testing.T, id string) {
	t.Helper()
	_, err := f.run.AddTask(context.Background(), id, state.TaskSpec{Agent: "w" + id, Title: "task " + id}, "leader")
	must(t, err)
}

// spawn starts crew spawn (the built binary, a real process) for task
// id of f's run with the worker command argv, and waits for its
// worker's start to be recorded: it returns the crew spawn process,
// a channel closed when it has exited, and the worker's record.
func (f *fixture) spawn(t *testing.T, id string, argv ...string) (*os.Process, <-chan struct{}, *state.Worker) {
	t.Helper()
	cmd := exec.Command(crewBinary(t), append([]string{"spawn", id, "--"}, argv...)...)
	cmd.Env = append(os.Environ(), "CREW_DIR="+f.dir, "CREW_RUN=r1")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	var w *state.Worker
	f.await(t, "the worker of "+id+" to start", func(st *state.State) bool {
		tk, err := st.Task(id)
		if err == nil && len(tk.Workers) > 0 {
			w = &tk.Workers[len(tk.Workers)-1]
		}
		select {
		case <-exited:
			t.Fatalf("crew spawn %s ended: %s", id, out.String())
		default:
		}
		return w != nil
	})
	t.Cleanup(func() { syscall.Kill(w.PID, syscall.SIGKILL) })
	return cmd.Process, exited, w
}

// await polls f's run until cond holds of its state. The bound is no
// timing assertion: it ends a test that would hang.
func (f *fixture) await(t *testing.T, what string, cond func(*state.State) bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		st, err := f.run.TaskState()
		must(t, err)
		if cond(st) {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// card returns the HTML of task id's card on the board.
func card(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `id="task-`+id+`"`)
	if i < 0 {
		t.Fatalf("no card for %s on the board:\n%s", id, page)
	}
	j := strings.Index(page[i:], "</article>")
	return page[i : i+j]
}

// TestCardsSayWhatTasksAreDoing: a card shows the command line's
// liveness (run.LivenessOf): working or quiet by --quiet-after, waiting
// on a question; a task not started says so, and no card says "quiet"
// for the time since its last event.
func TestCardsSayWhatTasksAreDoing(t *testing.T) {
	for _, tc := range []struct {
		quietAfter time.Duration
		t1         string
	}{{time.Hour, "working"}, {time.Nanosecond, "quiet"}} {
		f := newFixtureWith(t, web.Options{QuietAfter: tc.quietAfter})
		f.addPending(t, "t4")
		ctx := context.Background()
		_, _, err := f.run.Ask(ctx, run.SendOptions{Kind: events.KindQuestion, Task: "t2", From: "wt2", Body: "which?"}, false)
		must(t, err)
		_, page := get(t, f.client(t), f.base+"/runs/r1/")
		if c := card(t, page, "t1"); !strings.Contains(c, `data-life="`+tc.t1+`"`) {
			t.Errorf("quiet after %s: t1's card does not say %s:\n%s", tc.quietAfter, tc.t1, c)
		}
		if c := card(t, page, "t2"); !strings.Contains(c, `data-life="waiting"`) || strings.Contains(c, "quiet") {
			t.Errorf("t2 waits on its question; its card:\n%s", c)
		}
		if c := card(t, page, "t4"); !strings.Contains(c, "not started") || strings.Contains(c, "quiet") || strings.Contains(c, "data-life") {
			t.Errorf("t4 was never started; its card:\n%s", c)
		}
	}
}

// TestServeReapsALostWorker: a worker killed together with its crew
// spawn (real processes, SIGKILL) has its task failed by the server
// itself, with no command run, and its card moves to the failed column.
func TestServeReapsALostWorker(t *testing.T) {
	f := newFixture(t)
	f.addPending(t, "t4")
	spawn, _, w := f.spawn(t, "t4", "sleep", "600")
	must(t, spawn.Signal(syscall.SIGKILL))
	must(t, syscall.Kill(w.PID, syscall.SIGKILL))
	f.await(t, "t4 to fail", func(st *state.State) bool {
		tk, _ := st.Task("t4")
		return tk.Status == task.Failed
	})
	c := f.client(t)
	_, page := get(t, c, f.base+"/runs/r1/")
	col := page[strings.Index(page, `data-state="failed"`):]
	col = col[:strings.Index(col, "</section>")]
	if !strings.Contains(col, `id="task-t4"`) || !strings.Contains(col, "its exit status is unknown") {
		t.Errorf("the failed column:\n%s", col)
	}
}

// TestTaskPageShowsAttemptsAndLog: a task's page lists its worker's
// attempts (pid, host, how it ended) and streams its worker log; the
// reason keeps its lines.
func TestTaskPageShowsAttemptsAndLog(t *testing.T) {
	f := newFixture(t)
	f.addPending(t, "t4")
	_, exited, w := f.spawn(t, "t4", "sh", "-c", "echo 'hello from the worker'; echo 'second line'; sleep 0.2; exit 3")
	<-exited
	c := f.client(t)
	_, page := get(t, c, f.base+"/runs/r1/tasks/t4")
	i := strings.Index(page, `id="attempts"`)
	if i < 0 {
		t.Fatalf("no attempts on the task's page:\n%s", page)
	}
	attempts := page[i : i+strings.Index(page[i:], "</table>")]
	host, _ := os.Hostname()
	for _, want := range []string{`data-attempt="1"`, "<td>" + itoa(int64(w.PID)) + "</td>", "<td>" + host + "</td>", "exit status 3", "sh -c"} {
		if !strings.Contains(attempts, want) {
			t.Errorf("the attempts lack %q:\n%s", want, attempts)
		}
	}
	if !strings.Contains(page, `<dd class="reason">`) || !strings.Contains(page, "exited with status 3\nits output ended with:\nhello from the worker\nsecond line") {
		t.Errorf("the reason, its lines kept:\n%s", page)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.base+"/runs/r1/tasks/t4/log", nil)
	resp, err := c.Do(req)
	must(t, err)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("the log stream: %s, %q", resp.Status, ct)
	}
	got := readUntil(t, resp, "second line")
	if !strings.Contains(got, `event: log`) || !strings.Contains(got, `\nhello from the worker\nsecond line\n`) || !strings.Contains(got, `"start":true`) {
		t.Errorf("the log stream:\n%s", got)
	}
	// What is appended follows.
	fh, err := os.OpenFile(w.Log, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = fh.WriteString("later \x1b[31m\u202e\n")
	must(t, err)
	must(t, fh.Close())
	if got := readUntil(t, resp, "later"); !strings.Contains(got, `"text":"later \\x1b[31m\\u202e\n"`) {
		t.Errorf("appended output, control characters escaped:\n%s", got)
	}

	code, _ := get(t, c, f.base+"/runs/r1/tasks/nope/log")
	if code != http.StatusNotFound {
		t.Errorf("the log of an unknown task: %d", code)
	}
}

// readUntil reads the stream until it holds want.
func readUntil(t *testing.T, resp *http.Response, want string) string {
	t.Helper()
	var got strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), want) {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("%v; read:\n%s", err, got.String())
		}
	}
	return got.String()
}

// TestRunsListIsLive: the runs list's stream says when a run is
// created or changes.
func TestRunsListIsLive(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	_, page := get(t, c, f.base+"/")
	if !strings.Contains(page, `data-stream="/live"`) {
		t.Fatalf("the runs list follows nothing:\n%s", page)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.base+"/live", nil)
	resp, err := c.Do(req)
	must(t, err)
	defer resp.Body.Close()
	readUntil(t, resp, "retry:")
	_, err = f.root.Create(run.CreateOptions{ID: "r2", Title: "another", Dir: f.dir})
	must(t, err)
	readUntil(t, resp, "event: runs")
}
