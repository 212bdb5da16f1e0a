package web

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/mcpserver"
	"github.com/crew-dev/crew/run"
	"github.com/crew-dev/crew/supervise"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure a Server.
type Options struct {
	// Hosts are the Host header values requests may carry (Hosts gives
	// them for the address listened on); a request naming another host
	// is refused (421).
	Hosts []string
	// Token is the secret every request must carry (NewToken makes one).
	Token string
	// Actor is the name actions are recorded with; "" is each run's
	// leader (crew --as: app.Identity.As).
	Actor string
	// QuietAfter is how long a running task may show no sign of life
	// before its card says quiet (crew serve --quiet-after, as the
	// command line's); 0 is run.DefaultQuietAfter.
	QuietAfter time.Duration
	// UndeliveredAfter is how long a message sent to a worker may stay
	// undelivered before the board lists it with the likely reason (crew
	// serve --undelivered-after); 0 is app.DefaultUndeliveredAfter.
	UndeliveredAfter time.Duration
	// Version is the MCP server's version, reported to MCP clients.
	Version string
}

// Server serves the dashboard of the runs of one state root, agents'
// HTTP hooks (HooksPath) and MCP over Streamable HTTP (MCPPath). It is
// an http.Handler.
type Server struct {
	app         *app.App // over the root, acting as Options.Actor
	root        *run.Root
	actor       string
	quiet       time.Duration // Options.QuietAfter
	undelivered time.Duration // Options.UndeliveredAfter
	guard       *guard
	handler     http.Handler
	tmpl        *template.Template

	mu     sync.Mutex
	flashs map[string]flash // outcomes of actions, by key, shown once

	mcpMu      sync.Mutex
	mcpServers map[app.Identity]*mcpserver.Server // MCPPath's, by the identity sessions start with
	mcpNew     []*mcpserver.Server                // made since Supervise last started to follow them
	mcpMade    chan struct{}                      // a send when one is made (capacity 1)
}

// New returns a server for root. Options.Token must be set and
// Options.Hosts hold at least one host; otherwise crew.ErrInvalid. Each
// request opens the run it is about through root: give a root whose
// store keeps one Log per run (run.FindKept, store/nats's
// Options.KeepLogs), as crew serve does, so that a request starts from
// the state the last one left.
func New(root *run.Root, o Options) (*Server, error) {
	if len(o.Token) < 32 || len(o.Hosts) == 0 {
		return nil, fmt.Errorf("web server: a token of at least 32 characters and a host are needed: %w", crew.ErrInvalid)
	}
	tmpl, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	a := app.New(func() (*run.Root, error) { return root, nil }, app.Identity{As: o.Actor})
	s := &Server{app: a, root: root, actor: o.Actor, quiet: o.QuietAfter, undelivered: o.UndeliveredAfter, guard: newGuard(o.Token, o.Hosts), tmpl: tmpl, flashs: map[string]flash{}, mcpServers: map[app.Identity]*mcpserver.Server{}, mcpMade: make(chan struct{}, 1)}
	static, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.runsPage)
	mux.HandleFunc("GET /live", s.liveRuns)
	mux.HandleFunc("GET /runs/{run}/{$}", s.boardPage)
	mux.HandleFunc("GET /runs/{run}/timeline", s.timelinePage)
	mux.HandleFunc("GET /runs/{run}/events", s.eventsPage)
	mux.HandleFunc("GET /runs/{run}/live", s.live)
	mux.HandleFunc("GET /runs/{run}/tasks/{task}", s.threadPage)
	mux.HandleFunc("GET /runs/{run}/tasks/{task}/log", s.workerLog)
	mux.HandleFunc("POST /runs/{run}/tasks/{task}/{action}", s.taskAction)
	mux.HandleFunc("POST /runs/{run}/broadcast", s.broadcast)
	mux.HandleFunc("POST /runs/{run}/ack", s.ack)
	pages, programs := s.guard.wrap(mux), s.programs(o.Version)
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isProgram(r.URL.Path) {
			programs.ServeHTTP(w, r)
			return
		}
		pages.ServeHTTP(w, r)
	})
	return s, nil
}

// ReapEvery is how often Supervise looks for lost workers.
const ReapEvery = time.Second

// Supervise records, every period (ReapEvery when 0), the exits of the
// workers on this machine whose process and crew spawn are both gone
// (supervise.ReapRoot), failing their tasks, so that the board shows
// them failed with no command run. It returns when ctx ends. A failure
// to reap is passed to report (nil: dropped) once, not again until it
// changes, and reaping is tried again next period. It also has each MCP
// server (MCPPath) tell its subscribed sessions of the resources that
// changed, from the run's wake-up as events are committed, and every
// period besides (mcpserver.Server.Follow). crew serve runs it beside
// the server.
func (s *Server) Supervise(ctx context.Context, period time.Duration, report func(error)) {
	if period <= 0 {
		period = ReapEvery
	}
	var followers sync.WaitGroup
	defer followers.Wait()
	t := time.NewTicker(period)
	defer t.Stop()
	last := ""
	for {
		_, err := supervise.ReapRoot(ctx, s.root)
		if text := errText(err); text != last && ctx.Err() == nil {
			last = text // each failure once, not every period
			if err != nil && report != nil {
				report(err)
			}
		}
	wait:
		for {
			for _, m := range s.newMCPServers() {
				followers.Go(func() { m.Follow(ctx, period, report) })
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				break wait
			case <-s.mcpMade:
			}
		}
	}
}

// newMCPServers returns the MCP servers made since it was last called.
func (s *Server) newMCPServers() []*mcpserver.Server {
	s.mcpMu.Lock()
	defer s.mcpMu.Unlock()
	m := s.mcpNew
	s.mcpNew = nil
	return m
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// CSRF returns the CSRF token forms carry (for tests and tools that post
// to the server).
func (s *Server) CSRF() string { return s.guard.csrf }

// open opens run id for one request (app.App.Run through the root,
// whose store keeps its Log). An id that is missing or bad is
// crew.ErrInvalid, an unknown run crew.ErrNotFound.
func (s *Server) open(id string) (*run.Run, error) {
	if err := crew.ValidateID("run", id); err != nil {
		return nil, err
	}
	return s.app.Run(id)
}

// openTask opens the run and checks the task id of a request to a
// task's path (/runs/{run}/tasks/{task}/...): the run and the task id,
// or an error, told to the client (fail), and ok false.
func (s *Server) openTask(w http.ResponseWriter, r *http.Request) (rn *run.Run, id string, ok bool) {
	rn, err := s.open(r.PathValue("run"))
	if err == nil {
		id = r.PathValue("task")
		err = crew.ValidateID("task", id)
	}
	if err != nil {
		s.fail(w, r, err)
		return nil, "", false
	}
	return rn, id, true
}

// actorFor is the name an action in r is recorded with.
func (s *Server) actorFor(r *run.Run) string {
	if s.actor != "" {
		return s.actor
	}
	return r.Manifest.Leader
}

// page is what every page template gets.
type page struct {
	Title  string
	CSRF   string
	Run    string // the run the page shows, "" for the runs list
	Tab    string // board, timeline, events, thread
	Task   string // the task a thread page shows: its live updates follow the events about it
	Stream string // the URL of the page's live updates, "" for none
	Life   bool   // the page shows what tasks are doing: its live updates say when that changes
	Seq    int64  // the seq the page reflects: live updates start after it
	Flash  *flash
	Damage string // the damage met reading the log, shown as a banner
	Data   any
}

// render writes the page template name, or only its main part (the
// "main" template) when the request asks for a fragment (?fragment=1:
// the live update of an open page). It renders into a buffer first, so
// that a failure sends an error, not half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, name string, p *page) {
	s.renderStatus(w, r, http.StatusOK, name, p)
}

// renderStatus is render with an HTTP status other than 200.
func (s *Server) renderStatus(w http.ResponseWriter, r *http.Request, code int, name string, p *page) {
	p.CSRF = s.guard.csrf
	if p.Flash == nil {
		p.Flash = s.takeFlash(r.URL.Query().Get("flash"))
	}
	var b bytes.Buffer
	t := name
	if r.URL.Query().Get("fragment") == "1" {
		t = name + ".main"
	}
	if err := s.tmpl.ExecuteTemplate(&b, t, p); err != nil {
		http.Error(w, "crew serve: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(b.Bytes())
}

// fail answers a page request that could not be built, with the HTTP
// status of err's class (statusOf) and its message, in the page layout.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.renderStatus(w, r, statusOf(err), "error", &page{Title: "Error", Data: err.Error()})
}

// statusOf maps crew's error classes to HTTP statuses, as cmd/crew maps
// them to exit codes (docs/cli.md, Exit codes).
func statusOf(err error) int {
	switch {
	case errors.Is(err, crew.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, crew.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, crew.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, crew.ErrTimeout):
		return http.StatusGatewayTimeout
	case errors.Is(err, crew.ErrDenied):
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

// flash is the outcome of an action, shown once on the page the action
// returns to.
type flash struct {
	OK   bool
	Text string
	at   time.Time
}

// putFlash keeps f for the next page and returns its key. Outcomes not
// shown within ten minutes are dropped.
func (s *Server) putFlash(ok bool, text string) string {
	key := NewToken()[:16]
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for k, f := range s.flashs {
		if now.Sub(f.at) > 10*time.Minute {
			delete(s.flashs, k)
		}
	}
	s.flashs[key] = flash{OK: ok, Text: text, at: now}
	return key
}

func (s *Server) takeFlash(key string) *flash {
	if key == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.flashs[key]
	if !ok {
		return nil
	}
	delete(s.flashs, key)
	return &f
}

// back is where an action returns to: the form's "back" path when it is
// a path of this server, else the run's board.
func back(r *http.Request, runID string) string {
	b := r.PostFormValue("back")
	if !strings.HasPrefix(b, "/") || strings.HasPrefix(b, "//") || strings.ContainsAny(b, "\\?#\r\n") {
		return "/runs/" + runID + "/"
	}
	return b
}
