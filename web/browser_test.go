package web_test

// Tests in a real headless Chromium, driven with chromedp. They skip,
// saying why, when no Chromium is installed (.ci/run installs Debian's
// chromium with apt).

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/supervise"
	"github.com/crew-dev/crew/task"
	"github.com/crew-dev/crew/web"
)

// chromium returns the path of a Chromium or Chrome to drive: $CREW_CHROMIUM,
// else the first of the usual names on PATH; the test is skipped when
// there is none.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CREW_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium found (chromium, chromium-browser, google-chrome or $CREW_CHROMIUM): the browser tests need one; .ci/run installs Debian's chromium with apt")
	return ""
}

// browser is a headless Chromium tab, with the dialogs it opened.
type browser struct {
	ctx     context.Context
	mu      sync.Mutex
	dialogs []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, chromedp.WindowSize(1440, 900), chromedp.Flag("disable-dev-shm-usage", true))
	// Not a timing assertion: a bound so that a broken page fails the
	// test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	b := &browser{ctx: bctx}
	dialogs := chromedp.Events(bctx, page.JavascriptDialogOpening) // starts the browser
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, string(ev.Type)+": "+ev.Message)
			b.mu.Unlock()
			chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return b
}

// do runs the steps in the tab, failing the test on an error.
func (b *browser) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// value runs an action that returns a value.
func value[T any](t *testing.T, b *browser, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// textOf waits for an element matching the CSS selector sel to have
// text, and returns its textContent. It reads in one JavaScript call:
// a live page swaps its main element on every event (crew.js, swap), so
// chromedp.TextContent, which finds the node first and reads it after,
// fails with "No node with given id found" when a swap falls between.
func textOf(t *testing.T, b *browser, sel string) string {
	t.Helper()
	q, err := json.Marshal(sel)
	must(t, err)
	return value(t, b, chromedp.Poll[string](`document.querySelector(`+string(q)+`)?.textContent`))
}

// ready polls for a JavaScript condition to hold.
func ready(cond string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](cond)(ctx, t)
		return chromedp.Void{}, err
	}
}

func (b *browser) noDialogs(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.dialogs) > 0 {
		t.Fatalf("the page opened dialogs: %q", b.dialogs)
	}
}

var (
	crewOnce sync.Once
	crewBin  string
	crewErr  error
)

// crewBinary builds cmd/crew once for the worker processes.
func crewBinary(t *testing.T) string {
	t.Helper()
	crewOnce.Do(func() {
		dir, err := os.MkdirTemp("", "crew-web-test")
		if err != nil {
			crewErr = err
			return
		}
		crewBin = filepath.Join(dir, "crew")
		out, err := exec.Command("go", "build", "-o", crewBin, "github.com/crew-dev/crew/cmd/crew").CombinedOutput()
		if err != nil {
			crewErr = err
			crewBin = string(out)
		}
	})
	if crewErr != nil {
		t.Fatalf("go build: %v\n%s", crewErr, crewBin)
	}
	return crewBin
}

// TestBrowserAnswerAWorkersQuestion is the scenario: the board
// of a run with three workers; a worker (a real process) asks with crew
// ask --wait; the question appears without a reload; the person types
// an answer and clicks; the worker prints it.
func TestBrowserAnswerAWorkersQuestion(t *testing.T) {
	f := newFixture(t)
	b := newBrowser(t)
	bin := crewBinary(t)
	b.do(t, chromedp.Navigate(f.base+"/runs/r1/?token="+f.token),
		chromedp.WaitVisible(chromedp.CSS(`.column.running #task-t3`)),
		ready(`document.getElementById("live").textContent === "live"`))
	value(t, b, chromedp.Evaluate[int](`window.crewMarker = 42`))

	question := "Which database: Postgres or SQLite?"
	worker := exec.Command(bin, "ask", "--wait", question)
	worker.Env = append(os.Environ(), "CREW_DIR="+f.dir, "CREW_RUN=r1", "CREW_TASK=t1")
	var stdout, stderr bytes.Buffer
	worker.Stdout, worker.Stderr = &stdout, &stderr
	must(t, worker.Start())
	t.Cleanup(func() { worker.Process.Kill() })

	b.do(t, chromedp.WaitVisible(chromedp.CSS(`.column.waiting #task-t1 .question`)))
	if shown := textOf(t, b, `#task-t1 .question pre`); shown != question {
		t.Fatalf("the board shows the question as %q", shown)
	}
	if value(t, b, chromedp.Evaluate[int](`window.crewMarker`)) != 42 {
		t.Fatal("the page was reloaded to show the question")
	}
	b.do(t, chromedp.SendKeys(chromedp.CSS(`#task-t1 form.respond textarea`), "Postgres, version 16."))
	saveArtifact(t, "board.png", value(t, b, chromedp.CaptureScreenshot()))
	b.do(t, chromedp.Click(chromedp.CSS(`#task-t1 form.respond button`)),
		chromedp.WaitVisible(chromedp.CSS(`#flash.ok`)),
		chromedp.WaitVisible(chromedp.CSS(`.column.running #task-t1`)))

	done := make(chan error, 1)
	go func() { done <- worker.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("crew ask --wait: %v\n%s", err, stderr.String())
		}
	case <-b.ctx.Done():
		t.Fatal("the worker's crew ask --wait did not return after the answer")
	}
	if got := stdout.String(); got != "Postgres, version 16.\n" {
		t.Fatalf("the worker printed %q", got)
	}
	if flash := textOf(t, b, `#flash`); !strings.Contains(flash, "response sent to t1 as leader") {
		t.Errorf("the outcome shown: %q", flash)
	}

	// The event log shows the response, as the leader's, and follows the
	// log: an event committed now is appended as a row, as text.
	b.do(t, chromedp.Navigate(f.base+"/runs/r1/events"),
		ready(`document.getElementById("live").textContent === "live"`))
	row := value(t, b, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#log tr")).map(r => r.textContent).find(s => s.includes("task.responded")) || ""`))
	if !strings.Contains(row, "leader") || !strings.Contains(row, "Postgres, version 16.") {
		t.Errorf("the event log's row of the response: %q", row)
	}
	_, err := f.run.Send(context.Background(), run.SendOptions{Kind: events.KindReport, Task: "t2", From: "wt2", Body: "<i>halfway</i>"})
	must(t, err)
	b.do(t, ready(`Array.from(document.querySelectorAll("#log td.what")).some(td => td.textContent.includes("<i>halfway</i>"))`))
	if n := value(t, b, chromedp.Evaluate[int](`document.querySelectorAll("#log i").length`)); n != 0 {
		t.Errorf("a body became markup in the event log (%d elements)", n)
	}
	b.noDialogs(t)
}

// saveArtifact writes a test's output file (go test -artifacts keeps
// it, under -outputdir).
func saveArtifact(t *testing.T, name string, data []byte) {
	t.Helper()
	p := filepath.Join(t.ArtifactDir(), name)
	must(t, os.WriteFile(p, data, 0o644))
	t.Logf("saved %s", p)
}

// hostile are bodies that must render as text, whole, and run nothing.
var hostile = []string{
	`<script>window.crewPwned = 1; alert("script")</script>`,
	`<img src=x onerror="window.crewPwned = 2; alert('img')">`,
	`<a href="javascript:alert('link')">click me</a> javascript:alert(1)`,
	"abc \u202egnp.exe\u202c def",
	`"><svg onload=alert('svg')>{{.CSRF}}`,
	strings.Repeat("0123456789abcdef<b>x</b>\n", 900*1024/25),
}

// TestBrowserHostileBodiesRenderAsText sends each hostile body to and
// from a task while its thread is open (the live update), then loads
// every page that shows them.
func TestBrowserHostileBodiesRenderAsText(t *testing.T) {
	f := newFixture(t)
	b := newBrowser(t)
	ctx := context.Background()
	b.do(t, chromedp.Navigate(f.base+"/runs/r1/tasks/t2?token="+f.token),
		ready(`document.getElementById("live").textContent === "live"`))
	for _, body := range hostile {
		_, err := f.run.Send(ctx, run.SendOptions{Kind: events.KindReport, Task: "t2", From: "wt2", Body: body})
		must(t, err)
		_, err = f.run.Send(ctx, run.SendOptions{Kind: events.KindSteer, Task: "t2", From: "leader", Body: body})
		must(t, err)
	}
	want := 2 * len(hostile)
	b.do(t, ready(`document.querySelectorAll("#thread pre.body").length === `+itoa(int64(want))))
	check := func(where string) {
		t.Helper()
		texts := value(t, b, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#thread pre.body, .reports pre.body")).map(e => e.textContent)`))
		pwned := value(t, b, chromedp.Evaluate[int](`window.crewPwned || 0`))
		active := value(t, b, chromedp.Evaluate[int](`document.querySelectorAll("main img, main script, main a[href^='javascript'], main [onerror], main [onload], main pre svg").length`))
		if len(texts) == 0 && where != "/runs/r1/events" && where != "/runs/r1/timeline" {
			t.Fatalf("%s shows no bodies", where)
		}
		if pwned != 0 || active != 0 {
			t.Fatalf("%s: a body ran script (crewPwned %d) or made elements (%d)", where, pwned, active)
		}
		for i, got := range texts {
			if body := hostile[(i/2)%len(hostile)]; where == "thread" && got != human.Escape(body) {
				t.Fatalf("%s: body %d shown as %.80q (%d bytes); want it whole, as text (%d bytes)", where, i, got, len(got), len(human.Escape(body)))
			}
			if strings.ContainsRune(got, '\u202e') {
				t.Fatalf("%s: a right-to-left override reached the page unescaped", where)
			}
		}
		b.noDialogs(t)
	}
	check("thread")
	for _, u := range []string{"/runs/r1/tasks/t2", "/runs/r1/", "/runs/r1/events", "/runs/r1/timeline"} {
		b.do(t, chromedp.Navigate(f.base+u), chromedp.WaitReady(chromedp.CSS(`#main`)))
		check(u)
	}
}

// TestBrowserReconnectResumes drops the page's connections while events
// are committed: the browser's EventSource reconnects with the last seq
// it saw (Last-Event-ID) and the event log ends up with every event
// once, in order.
func TestBrowserReconnectResumes(t *testing.T) {
	f := newFixture(t)
	b := newBrowser(t)
	b.do(t, chromedp.Navigate(f.base+"/runs/r1/events?token="+f.token),
		ready(`document.getElementById("live").textContent === "live"`))
	ctx := context.Background()
	for i := range 6 {
		if i == 2 || i == 4 {
			f.srv.CloseClientConnections()
		}
		_, err := f.run.Send(ctx, run.SendOptions{Kind: events.KindReport, Task: "t3", From: "wt3", Body: "report " + itoa(int64(i))})
		must(t, err)
	}
	last := f.lastSeq(t)
	b.do(t, ready(`document.querySelector("#log tr:last-child").dataset.seq === "`+itoa(last)+`"`))
	seqs := value(t, b, chromedp.Evaluate[[]int64](`Array.from(document.querySelectorAll("#log tr")).map(r => Number(r.dataset.seq))`))
	for i, s := range seqs {
		if s != int64(i)+1 {
			t.Fatalf("the event log after reconnecting lists seqs %v; want 1 … %d, each once", seqs, last)
		}
	}
	if int64(len(seqs)) != last {
		t.Fatalf("%d rows, want %d", len(seqs), last)
	}
}

// liveBoard opens f's board in b and waits for its live stream, with a
// marker that a reload would drop.
func liveBoard(t *testing.T, b *browser, f *fixture, path string) {
	t.Helper()
	b.do(t, chromedp.Navigate(f.base+path+"?token="+f.token),
		ready(`document.getElementById("live").textContent === "live"`))
	value(t, b, chromedp.Evaluate[int](`window.crewMarker = 42`))
}

// notReloaded fails the test when the page was loaded again.
func notReloaded(t *testing.T, b *browser) {
	t.Helper()
	if value(t, b, chromedp.Evaluate[int](`window.crewMarker || 0`)) != 42 {
		t.Fatal("the page was reloaded")
	}
}

// TestBrowserLostWorkerShowsFailed: a worker killed together with its
// crew spawn (real processes, SIGKILL to both) is shown failed on the
// open board with no command run: crew serve reaps it.
func TestBrowserLostWorkerShowsFailed(t *testing.T) {
	f := newFixture(t)
	b := newBrowser(t)
	f.addPending(t, "t4")
	liveBoard(t, b, f, "/runs/r1/")
	spawn, _, w := f.spawn(t, "t4", "sleep", "600")
	b.do(t, chromedp.WaitVisible(chromedp.CSS(`#task-t4 [data-life="working"]`)))
	must(t, spawn.Signal(syscall.SIGKILL))
	must(t, syscall.Kill(w.PID, syscall.SIGKILL))
	b.do(t, chromedp.WaitVisible(chromedp.CSS(`.column.failed #task-t4`)))
	notReloaded(t, b)
	if text := textOf(t, b, `#task-t4 .reason`); !strings.Contains(text, "exit status is unknown") {
		t.Errorf("the failed card's reason: %q", text)
	}
	b.noDialogs(t)
}

// TestBrowserQuietWorker: with crew serve --quiet-after 4s, a running
// task with no sign of life turns quiet on the open board; a heartbeat
// makes it working again, and then quiet again, with no event and no
// reload. A waiting task says waiting; a task not started, not quiet.
func TestBrowserQuietWorker(t *testing.T) {
	f := newFixtureWith(t, web.Options{QuietAfter: 4 * time.Second})
	b := newBrowser(t)
	f.addPending(t, "t4")
	_, _, err := f.run.Ask(context.Background(), run.SendOptions{Kind: events.KindQuestion, Task: "t2", From: "wt2", Body: "which?"}, false)
	must(t, err)
	liveBoard(t, b, f, "/runs/r1/")
	b.do(t, chromedp.WaitVisible(chromedp.CSS(`#task-t1 [data-life="quiet"]`)))
	if text := textOf(t, b, `#task-t1 .times`); !strings.HasPrefix(text, "ran ") || !strings.Contains(text, "quiet for ") {
		t.Errorf("t1's card: %q", text)
	}
	seq := f.lastSeq(t)
	must(t, supervise.Heartbeat(f.run, "t1"))
	b.do(t, chromedp.WaitVisible(chromedp.CSS(`#task-t1 [data-life="working"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#task-t1 [data-life="quiet"]`)))
	notReloaded(t, b)
	if f.lastSeq(t) != seq {
		t.Errorf("a heartbeat wrote to the log")
	}
	if text := textOf(t, b, `#task-t2 .times`); !strings.Contains(text, "waiting for ") {
		t.Errorf("t2's card: %q", text)
	}
	if text := textOf(t, b, `#task-t4 .times`); strings.Contains(text, "quiet") || !strings.Contains(text, "not started") {
		t.Errorf("t4's card: %q", text)
	}
	b.noDialogs(t)
}

// TestBrowserWorkerLogFollows: a task's page shows its attempt and its
// worker's output as the worker (a real process) prints it, through
// the page's updates; when the worker is killed the attempt says how.
func TestBrowserWorkerLogFollows(t *testing.T) {
	f := newFixture(t)
	b := newBrowser(t)
	f.addPending(t, "t4")
	_, _, w := f.spawn(t, "t4", "sh", "-c", "i=0; while :; do i=$((i+1)); echo \"line $i\"; sleep 0.2; done")
	liveBoard(t, b, f, "/runs/r1/tasks/t4")
	b.do(t, ready(`document.getElementById("worker-log").textContent.includes("line 1\n")`))
	if pid := textOf(t, b, `#attempts tr[data-attempt="1"] td:nth-child(2)`); pid != itoa(int64(w.PID)) {
		t.Errorf("the attempt shows pid %q, want %d", pid, w.PID)
	}
	// An event draws the page again: the log stays and goes on.
	updated := value(t, b, chromedp.Evaluate[string](`document.body.dataset.updated || ""`))
	_, err := f.run.Send(context.Background(), run.SendOptions{Kind: events.KindReport, Task: "t4", From: "wt4", Body: "halfway"})
	must(t, err)
	b.do(t, ready(`(document.body.dataset.updated || "") !== "`+updated+`"`),
		ready(`document.getElementById("worker-log").textContent.includes("line 12\n")`))
	if text := textOf(t, b, `#worker-log`); !strings.Contains(text, "line 1\n") {
		t.Errorf("the log lost its start: %q", text)
	}
	must(t, syscall.Kill(w.PID, syscall.SIGTERM))
	b.do(t, ready(`document.querySelector("#attempts td.exit").textContent.includes("signal terminated")`),
		ready(`document.getElementById("status").textContent === "failed"`))
	notReloaded(t, b)
	b.noDialogs(t)
}

// TestBrowserReasonKeepsItsLines: a failure reason of several lines
// with a long path shows its lines, wrapped inside its card and on the
// task's page.
func TestBrowserReasonKeepsItsLines(t *testing.T) {
	f := newFixture(t)
	b := newBrowser(t)
	long := "/tmp/" + strings.Repeat("a-very-long-directory-name/", 20) + "output.log"
	reason := "the check failed:\nsee " + long + "\nfor the rest"
	_, err := f.run.Transition(context.Background(), "t1", task.Fail, "leader", reason, nil)
	must(t, err)
	for _, p := range []struct{ path, reason, box string }{
		{"/runs/r1/", "#task-t1 .reason", "#task-t1"},
		{"/runs/r1/tasks/t1", "dd.reason", "dl.facts"},
	} {
		b.do(t, chromedp.Navigate(f.base+p.path+"?token="+f.token), chromedp.WaitVisible(chromedp.CSS(p.reason)))
		if text := value(t, b, chromedp.Evaluate[string](`document.querySelector("`+p.reason+`").innerText`)); text != reason {
			t.Errorf("%s: the reason reads %q; want %q, its lines kept", p.path, text, reason)
		}
		fits := `(() => { const r = document.querySelector("` + p.reason + `").getBoundingClientRect(), b = document.querySelector("` + p.box + `").getBoundingClientRect();
			return r.right <= b.right + 1 && document.documentElement.scrollWidth <= window.innerWidth; })()`
		if !value(t, b, chromedp.Evaluate[bool](fits)) {
			saveArtifact(t, "reason.png", value(t, b, chromedp.CaptureScreenshot()))
			t.Errorf("%s: the reason overflows its box", p.path)
		}
	}
}

// TestBrowserUndelivered: with crew serve --undelivered-after 2s, a
// steer that no hook, wake or inbox delivered appears on the open board
// under "Not delivered" with the likely reason, with no event and no
// reload; once the worker reads it, it goes, and the task's page says
// how it was delivered.
func TestBrowserUndelivered(t *testing.T) {
	f := newFixtureWith(t, web.Options{UndeliveredAfter: 2 * time.Second})
	b := newBrowser(t)
	m, err := f.run.Send(context.Background(), run.SendOptions{Kind: events.KindSteer, Task: "t1", From: "leader", Body: "use the rune slice"})
	must(t, err)
	liveBoard(t, b, f, "/runs/r1/")
	sel := `#undelivered [data-message="` + m.ID + `"]`
	b.do(t, chromedp.WaitVisible(chromedp.CSS(sel)))
	notReloaded(t, b)
	text := textOf(t, b, sel)
	if !strings.Contains(text, "steer to t1") || !strings.Contains(text, "use the rune slice") || !strings.Contains(text, "likely: no hook of its agent was ever called for this task") {
		t.Errorf("the undelivered steer: %q", text)
	}
	_, err = f.run.Inbox(context.Background(), "t1", run.InboxOptions{})
	must(t, err)
	b.do(t, chromedp.WaitNotPresent(chromedp.CSS(sel)))
	// The task's page says how it was delivered.
	b.do(t, chromedp.Navigate(f.base+"/runs/r1/tasks/t1?token="+f.token))
	if text := textOf(t, b, `.msg.steer header`); !strings.Contains(text, "delivered via inbox") {
		t.Errorf("the steer on t1's page: %q", text)
	}
	b.noDialogs(t)
}
