package web_test

// Tests in a real headless Chromium, driven with chromedp. They skip,
// saying why, when no Chromium is installed (.ci/run installs Debian's
// chromium with apt).

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/run"
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
	if shown := value(t, b, chromedp.TextContent(chromedp.CSS(`#task-t1 .question pre`))); shown != question {
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
	if flash := value(t, b, chromedp.TextContent(chromedp.CSS(`#flash`))); !strings.Contains(flash, "response sent to t1 as leader") {
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
