package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/natstest"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/state"
	natsstore "github.com/crew-dev/crew/store/nats"
	"github.com/crew-dev/crew/task"
	"github.com/crew-dev/crew/web"
)

// fixture is a state root with run r1 of three started tasks (t1, t2,
// t3) and a dashboard serving it.
type fixture struct {
	dir   string
	root  *run.Root
	run   *run.Run
	srv   *httptest.Server
	web   *web.Server
	token string
	base  string // http://127.0.0.1:PORT
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, web.Options{})
}

// newFixtureWith is newFixture serving with o (its Hosts and Token set
// here).
func newFixtureWith(t *testing.T, o web.Options) *fixture {
	t.Helper()
	dir := t.TempDir()
	_, err := run.Init(dir, crew.PrivatePerm)
	must(t, err)
	root, err := run.FindKept(dir, crew.PrivatePerm) // as crew serve finds it
	must(t, err)
	t.Cleanup(func() { root.Close() }) // snapshots still being written, before TempDir goes
	return newFixtureOn(t, root, dir, o)
}

// newFixtureOn is newFixture on the state root given (dir: its
// directory, or the run's working directory for a root without one),
// serving with o. The server reaps lost workers, as crew serve does.
func newFixtureOn(t *testing.T, root *run.Root, dir string, o web.Options) *fixture {
	t.Helper()
	return newFixturePeriod(t, root, dir, o, 0)
}

// newFixturePeriod is newFixtureOn with the period of the server's
// Supervise (0: web.ReapEvery).
func newFixturePeriod(t *testing.T, root *run.Root, dir string, o web.Options, period time.Duration) *fixture {
	t.Helper()
	f := &fixture{dir: dir, root: root}
	var err error
	f.run, err = f.root.Create(run.CreateOptions{ID: "r1", Title: "three workers", Dir: f.dir})
	must(t, err)
	ctx := context.Background()
	for _, id := range []string{"t1", "t2", "t3"} {
		_, err := f.run.AddTask(ctx, id, state.TaskSpec{Agent: "w" + id, Title: "task " + id}, "leader")
		must(t, err)
		_, err = f.run.Transition(ctx, id, task.Start, "w"+id, "", nil)
		must(t, err)
	}
	f.srv = httptest.NewUnstartedServer(nil)
	f.base = "http://" + f.srv.Listener.Addr().String()
	hosts, err := web.Hosts(f.srv.Listener.Addr().String())
	must(t, err)
	f.token = web.NewToken()
	o.Hosts, o.Token = hosts, f.token
	f.web, err = web.New(f.root, o)
	must(t, err)
	f.srv.Config.Handler = f.web
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.web.Supervise(sctx, period, func(err error) { t.Logf("reap: %v", err) }); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	return f
}

// client returns an HTTP client holding the token's cookie, and that
// does not follow redirects.
func (f *fixture) client(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(f.base + "/?token=" + f.token)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %s, Location %q; want 303 to /", resp.Status, resp.Header.Get("Location"))
	}
	return c
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(b)
}

func (f *fixture) lastSeq(t *testing.T) int64 {
	t.Helper()
	st, err := f.run.TaskState()
	must(t, err)
	return st.Seq
}

func TestLoginSetsAStrictHttpOnlyCookie(t *testing.T) {
	f := newFixture(t)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(f.base + "/runs/r1/?token=" + f.token)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/runs/r1/" {
		t.Fatalf("got %s to %q; want 303 to the same page without the token", resp.Status, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || cookies[0].Name != "crew_token_"+f.base[strings.LastIndex(f.base, ":")+1:] || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Value != f.token {
		t.Fatalf("cookies %+v; want one HttpOnly SameSite=Strict cookie holding the token", cookies)
	}
}

func TestRequestsWithoutTheTokenAreRefused(t *testing.T) {
	f := newFixture(t)
	for _, u := range []string{"/", "/live", "/runs/r1/", "/runs/r1/live", "/runs/r1/tasks/t1/log", "/static/crew.js", "/?token=" + strings.Repeat("0", 64)} {
		code, body := get(t, http.DefaultClient, f.base+u)
		if code != http.StatusUnauthorized || strings.Contains(body, "r1") && u != "/" {
			t.Errorf("GET %s without the token: %d %q; want 401", u, code, body)
		}
	}
	req, _ := http.NewRequest("GET", f.base+"/", nil)
	req.AddCookie(&http.Cookie{Name: "crew_token_" + f.base[strings.LastIndex(f.base, ":")+1:], Value: web.NewToken()})
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong cookie: %s; want 401", resp.Status)
	}
}

func TestAForeignHostIsRefused(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	port := f.base[strings.LastIndex(f.base, ":")+1:]
	for _, host := range []string{"evil.example", "evil.example:" + port, "127.0.0.1", "127.0.0.2:" + port} {
		req, _ := http.NewRequest("GET", f.base+"/runs/r1/?token="+f.token, nil)
		req.Host = host
		resp, err := c.Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest || len(resp.Cookies()) > 0 {
			t.Errorf("Host %q: %s, cookies %v; want 421 and no cookie", host, resp.Status, resp.Cookies())
		}
	}
	// localhost names the loopback address served.
	req, _ := http.NewRequest("GET", f.base+"/", nil)
	req.Host = "localhost:" + port
	resp, err := c.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized { // the cookie jar holds it for 127.0.0.1 only
		t.Errorf("Host localhost: %s; want it let through to the token check (401)", resp.Status)
	}
}

// post posts form to path with the given Origin ("" for none).
func post(t *testing.T, c *http.Client, f *fixture, path, origin string, form url.Values) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", f.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	must(t, err)
	resp.Body.Close()
	return resp
}

func TestStateChangesNeedCSRFAndOrigin(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	seq := f.lastSeq(t)
	good := url.Values{"csrf": {f.web.CSRF()}, "body": {"Stop and report."}}
	for _, tc := range []struct {
		name   string
		origin string
		form   url.Values
	}{
		{"no CSRF token", f.base, url.Values{"body": {"x"}}},
		{"a wrong CSRF token", f.base, url.Values{"csrf": {strings.Repeat("a", 64)}, "body": {"x"}}},
		{"no Origin", "", good},
		{"a foreign Origin", "http://evil.example", good},
		{"the null Origin", "null", good},
	} {
		resp := post(t, c, f, "/runs/r1/tasks/t1/steer", tc.origin, tc.form)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s; want 403", tc.name, resp.Status)
		}
	}
	if got := f.lastSeq(t); got != seq {
		t.Fatalf("refused requests committed events: seq %d -> %d", seq, got)
	}
	// A GET cannot change state: no handler takes it.
	if code, _ := get(t, c, f.base+"/runs/r1/tasks/t1/steer?body=x"); code == http.StatusOK || f.lastSeq(t) != seq {
		t.Fatalf("GET of an action: %d, seq %d; want refused and nothing committed", code, f.lastSeq(t))
	}
	resp := post(t, c, f, "/runs/r1/tasks/t1/steer", f.base, good)
	if resp.StatusCode != http.StatusSeeOther || f.lastSeq(t) != seq+1 {
		t.Fatalf("a good steer: %s, seq %d; want 303 and one event", resp.Status, f.lastSeq(t))
	}
}

func TestEveryPageHasAContentSecurityPolicyWithoutInlineScript(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	for _, u := range []string{"/", "/runs/r1/", "/runs/r1/tasks/t1", "/runs/r1/events", "/runs/r1/timeline", "/runs/nope/"} {
		resp, err := c.Get(f.base + u)
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: CSP %q", u, csp)
		}
		if strings.Contains(string(b), "<script>") || strings.Contains(string(b), " on") && strings.Contains(string(b), "onclick") {
			t.Errorf("%s has inline script", u)
		}
	}
}

// TestActionsAreTheCommandLinesOperations checks each action's event,
// recorded with the leader's name, and that a refused action says why.
func TestActionsAreTheCommandLinesOperations(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	ctx := context.Background()
	q, _, err := f.run.Ask(ctx, run.SendOptions{Kind: events.KindQuestion, Task: "t1", From: "wt1", Body: "Which DB?"}, false)
	must(t, err)
	rep, err := f.run.Send(ctx, run.SendOptions{Kind: events.KindReport, Task: "t2", From: "wt2", Body: "half done"})
	must(t, err)
	form := func(kv ...string) url.Values {
		v := url.Values{"csrf": {f.web.CSRF()}}
		for i := 0; i < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	for _, a := range []struct {
		path string
		form url.Values
		typ  string
	}{
		{"/runs/r1/tasks/t1/respond", form("body", "Postgres.\r\nVersion 16."), events.TaskResponded},
		{"/runs/r1/tasks/t2/steer", form("body", "tests first"), events.MessageSent},
		{"/runs/r1/tasks/t2/follow-up", form("body", "then docs", "priority", "high"), events.MessageSent},
		{"/runs/r1/tasks/t3/nudge", form(), events.MessageSent},
		{"/runs/r1/broadcast", form("body", "freeze"), events.MessageSent},
		{"/runs/r1/ack", form("id", rep.ID), events.MessageAcknowledged},
		{"/runs/r1/tasks/t3/cancel", form("reason", "not needed"), events.TaskCancelled},
		{"/runs/r1/tasks/t3/retry", form(), events.TaskRetried},
	} {
		seq := f.lastSeq(t)
		resp := post(t, c, f, a.path, f.base, a.form)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: %s", a.path, resp.Status)
		}
		cur, err := f.run.Events(seq)
		must(t, err)
		e, err := cur.Next()
		cur.Close()
		must(t, err)
		if e.Type != a.typ || (e.Type != events.MessageAcknowledged && e.Actor != "leader") {
			t.Errorf("%s: event %s by %q; want %s by leader", a.path, e.Type, e.Actor, a.typ)
		}
		if a.typ == events.TaskResponded && (e.Message.Body != "Postgres.\nVersion 16." || e.Message.ReplyTo != q.ID) {
			t.Errorf("respond stored %q replying to %s", e.Message.Body, e.Message.ReplyTo)
		}
		// The outcome is shown once on the page the action returned to.
		code, page := get(t, c, f.base+resp.Header.Get("Location"))
		if code != http.StatusOK || !strings.Contains(page, `class="flash ok"`) {
			t.Errorf("%s: the page after it (%d) shows no outcome", a.path, code)
		}
	}
	// A respond that lost the race: the question was answered already.
	resp := post(t, c, f, "/runs/r1/tasks/t1/respond", f.base, form("body", "MySQL", "back", "/runs/r1/tasks/t1"))
	_, page := get(t, c, f.base+resp.Header.Get("Location"))
	if !strings.Contains(page, `class="flash bad"`) || !strings.Contains(page, "respond refused") || !strings.Contains(page, "answered") {
		t.Errorf("a respond to an answered question does not say it was refused and why:\n%s", page)
	}
	// A steer without a body: refused in the dashboard's words, not the
	// command line's.
	resp = post(t, c, f, "/runs/r1/tasks/t1/steer", f.base, form("body", "  ", "back", "/runs/r1/tasks/t1"))
	_, page = get(t, c, f.base+resp.Header.Get("Location"))
	if !strings.Contains(page, "steer refused: empty steer") || strings.Contains(page, "standard input") {
		t.Errorf("an empty steer is not refused in the dashboard's words:\n%s", page)
	}
}

func TestADamagedLogShowsABannerNamingThePlace(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	log := filepath.Join(f.run.Dir(), "events.jsonl")
	fh, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = fh.WriteString("{not an event}\n")
	must(t, err)
	must(t, fh.Close())
	for _, u := range []string{"/runs/r1/", "/runs/r1/events", "/runs/r1/tasks/t1", "/runs/r1/timeline"} {
		code, page := get(t, c, f.base+u)
		if code != http.StatusOK || !strings.Contains(page, `class="banner damage"`) || !strings.Contains(page, "events.jsonl") {
			t.Errorf("%s (%d) shows no banner naming the damaged place", u, code)
		}
		if !strings.Contains(page, "t1") {
			t.Errorf("%s hides what could be read", u)
		}
	}
}

func TestUnknownRunOrTaskIsNotFound(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	for _, u := range []string{"/runs/nope/", "/runs/r1/tasks/nope", "/runs/r1/tasks/..%2f..", "/runs/r1/tasks/t1/explode"} {
		code, _ := get(t, c, f.base+u)
		if code != http.StatusNotFound && code != http.StatusBadRequest && code != http.StatusMethodNotAllowed {
			t.Errorf("GET %s: %d; want 404, 400 or 405", u, code)
		}
	}
}

// TestLiveResumesFromLastEventID reads the stream as a reconnecting
// browser does.
func TestLiveResumesFromLastEventID(t *testing.T) {
	checkLive(t, newFixture(t))
}

// TestNATSStore serves a run kept on NATS JetStream (a real server):
// the board, an action and the live stream.
func TestNATSStore(t *testing.T) {
	srv := natstest.Server(t)
	s, err := natsstore.Dial(context.Background(), srv.ClientURL(), natsstore.Options{KeepLogs: true})
	must(t, err)
	t.Cleanup(func() { s.Close() })
	f := newFixtureOn(t, run.NewRoot(s), t.TempDir(), web.Options{})
	c := f.client(t)
	code, page := get(t, c, f.base+"/runs/r1/")
	if code != http.StatusOK || strings.Count(page, `class="card running"`) != 3 {
		t.Fatalf("the board of a run on NATS (%d):\n%s", code, page)
	}
	seq := f.lastSeq(t)
	resp := post(t, c, f, "/runs/r1/tasks/t2/nudge", f.base, url.Values{"csrf": {f.web.CSRF()}})
	if resp.StatusCode != http.StatusSeeOther || f.lastSeq(t) != seq+1 {
		t.Fatalf("nudge on NATS: %s, seq %d -> %d", resp.Status, seq, f.lastSeq(t))
	}
	checkLive(t, f)
}

func checkLive(t *testing.T, f *fixture) {
	t.Helper()
	c := f.client(t)
	seq := f.lastSeq(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.base+"/runs/r1/live?since=0", nil)
	req.Header.Set("Last-Event-ID", itoa(seq-1))
	resp, err := c.Do(req)
	must(t, err)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	_, err = f.run.Send(context.Background(), run.SendOptions{Kind: events.KindReport, Task: "t2", From: "wt2", Body: "<b>live</b>"})
	must(t, err)
	var got strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), "live") {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		must(t, err)
	}
	s := got.String()
	if strings.Contains(s, "id: "+itoa(seq-1)+"\n") || !strings.Contains(s, "id: "+itoa(seq)+"\n") || !strings.Contains(s, "id: "+itoa(seq+1)+"\n") {
		t.Fatalf("stream after Last-Event-ID %d:\n%s", seq-1, s)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestTimelineDrawsSpansAndMarks checks the SVG lanes: t1 ran, waited
// on a question and runs again after the answer; t3 was cancelled.
func TestTimelineDrawsSpansAndMarks(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	ctx := context.Background()
	_, _, err := f.run.Ask(ctx, run.SendOptions{Kind: events.KindQuestion, Task: "t1", From: "wt1", Body: "<b>Which DB?</b>"}, false)
	must(t, err)
	_, err = f.run.Send(ctx, run.SendOptions{Kind: events.KindResponse, Task: "t1", From: "leader", Body: "Postgres"})
	must(t, err)
	_, err = f.run.Transition(ctx, "t3", task.Cancel, "leader", "", nil)
	must(t, err)
	_, page := get(t, c, f.base+"/runs/r1/timeline")
	lane := func(id string) string {
		i := strings.Index(page, `<g class="lane" data-task="`+id+`">`)
		if i < 0 {
			t.Fatalf("no lane for %s:\n%s", id, page)
		}
		j := strings.Index(page[i:], "</g>")
		return page[i : i+j]
	}
	t1 := lane("t1")
	for _, want := range []string{`class="span running"`, `class="span waiting"`, `class="mark question"`, `class="mark response"`, "&lt;b&gt;Which DB?&lt;/b&gt;"} {
		if !strings.Contains(t1, want) {
			t.Errorf("t1's lane lacks %s:\n%s", want, t1)
		}
	}
	if strings.Count(t1, `class="span running"`) != 2 || strings.Count(t1, `class="span waiting"`) != 1 {
		t.Errorf("t1 ran, waited and ran again; its lane:\n%s", t1)
	}
	if t3 := lane("t3"); strings.Count(t3, `class="span running"`) != 1 || strings.Contains(t3, "waiting") || !strings.Contains(t3, `data-end="cancelled"`) {
		t.Errorf("t3 ran, then was cancelled; its lane:\n%s", t3)
	}
	if strings.Contains(t1, "data-end") {
		t.Errorf("t1 has not ended; its lane:\n%s", t1)
	}
	// The time axis: ticks from 0s, labelled with the time since the
	// run's creation.
	if i := strings.Index(page, `<g class="ticks">`); i < 0 || !strings.Contains(page[i:], `text-anchor="middle"><title>`) || !strings.Contains(page[i:], "</title>0s</text>") {
		t.Errorf("no time axis:\n%s", page)
	}
	// The thread page draws the task's own lane only.
	_, page = get(t, c, f.base+"/runs/r1/tasks/t1")
	if strings.Count(page, `<g class="lane"`) != 1 || !strings.Contains(page, `data-task="t1"`) {
		t.Errorf("the thread of t1 does not draw its lane alone")
	}
}

// TestActionsReturnOnlyToThisServer: the page an action returns to is a
// path of this server, never another site.
func TestActionsReturnOnlyToThisServer(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	for _, b := range []string{"//evil.example/x", "https://evil.example/", "/\\evil.example", "runs/r1/", "/runs/r1/tasks/t1?x=1"} {
		resp := post(t, c, f, "/runs/r1/tasks/t1/nudge", f.base, url.Values{"csrf": {f.web.CSRF()}, "back": {b}})
		if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/runs/r1/?flash=") {
			t.Errorf("back %q: redirected to %q; want the run's board", b, loc)
		}
	}
	resp := post(t, c, f, "/runs/r1/tasks/t1/nudge", f.base, url.Values{"csrf": {f.web.CSRF()}, "back": {"/runs/r1/tasks/t1"}})
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/runs/r1/tasks/t1?flash=") {
		t.Errorf("back to the thread: redirected to %q", loc)
	}
}

// A failed task is open for the leader to acknowledge on the board and
// on the task's page, as a report is: crew's failure message, with the
// reason; acknowledging it takes it off both.
func TestBoardShowsFailures(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	_, err := f.run.Transition(context.Background(), "t2", task.Fail, "leader", "no <disk>", nil)
	must(t, err)
	p, err := f.run.Pending(run.Leader)
	must(t, err)
	if len(p.Messages) != 1 || p.Messages[0].Kind != events.KindFailure {
		t.Fatalf("the leader's pending: %+v, want t2's failure", p.Messages)
	}
	id := p.Messages[0].ID
	_, board := get(t, c, f.base+"/runs/r1/")
	if !strings.Contains(board, `<article class="msg report failure">`) || !strings.Contains(board, "task t2 failed: no &lt;disk&gt;") ||
		!strings.Contains(board, `name="id" value="`+id+`"`) {
		t.Fatalf("the board does not show t2's failure to acknowledge:\n%s", board)
	}
	_, page := get(t, c, f.base+"/runs/r1/tasks/t2")
	if !strings.Contains(page, `value="`+id+`"><button type="submit">Acknowledge failure `) {
		t.Fatalf("t2's page has no acknowledge for its failure:\n%s", page)
	}
	resp := post(t, c, f, "/runs/r1/ack", f.base, url.Values{"csrf": {f.web.CSRF()}, "id": {id}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("ack: %s", resp.Status)
	}
	if _, board := get(t, c, f.base+"/runs/r1/"); strings.Contains(board, "task t2 failed") {
		t.Fatalf("acknowledged, the failure is still on the board:\n%s", board)
	}
}
