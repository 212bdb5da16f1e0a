package web

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/internal/agentconfig"
	"github.com/crew-dev/crew/mcpserver"
	"github.com/crew-dev/crew/run"
)

// The paths crew serve answers programs on, beside the dashboard's pages.
const (
	// HooksPath begins the paths of agents' HTTP hooks:
	// /hooks/AGENT/EVENT, such as /hooks/claude/PostToolUse
	// (hookHandler).
	HooksPath = "/hooks/"
	// MCPPath is the MCP server's Streamable HTTP endpoint: the same
	// tools and resources as crew mcp (mcpserver.New).
	MCPPath = "/mcp"
)

// MCP query parameters and headers: the identity an MCP session acts
// with, fixed when the session starts (its initialize request). The
// query parameters (run, task, as) come first, then the headers
// (agentconfig.HeaderRun, HeaderTask, HeaderAgent), as crew mcp's --run,
// --task and --as come before CREW_*.
func mcpIdentity(r *http.Request) app.Identity {
	q := r.URL.Query()
	pick := func(param, header string) string {
		if v := q.Get(param); v != "" {
			return v
		}
		return r.Header.Get(header)
	}
	return app.Identity{Run: pick("run", agentconfig.HeaderRun), Task: pick("task", agentconfig.HeaderTask), As: pick("as", agentconfig.HeaderAgent)}
}

// programs returns the handler of the paths programs call (HooksPath,
// MCPPath), each behind guard.program.
func (s *Server) programs(version string) http.Handler {
	appFor := func(id app.Identity) *app.App {
		return app.New(func() (*run.Root, error) { return s.root, nil }, id)
	}
	// One MCP server per identity, made at the first session that starts
	// with it and kept: the SDK asks for the server at every request (to
	// check the protocol version), and registering every tool costs
	// milliseconds. A session keeps the server of its initialize
	// request, so its identity is fixed there.
	mcpHandler := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		id := mcpIdentity(r)
		for _, v := range []struct{ kind, id string }{{"run", id.Run}, {"task", id.Task}, {"agent", id.As}} {
			if v.id != "" && crew.ValidateID(v.kind, v.id) != nil {
				return nil // 400
			}
		}
		s.mcpMu.Lock()
		defer s.mcpMu.Unlock()
		if m, ok := s.mcpServers[id]; ok {
			return m.Server
		}
		m := mcpserver.New(mcpserver.Options{App: appFor(id), Version: version, Task: id.Task})
		s.mcpServers[id] = m
		s.mcpNew = append(s.mcpNew, m)
		select {
		case s.mcpMade <- struct{}{}: // Supervise follows it
		default:
		}
		return m.Server
	}, &mcp.StreamableHTTPOptions{})
	mux := http.NewServeMux()
	mux.Handle(HooksPath, hookHandler{App: appFor})
	mux.Handle(MCPPath, mcpHandler)
	return s.guard.program(mux)
}

// isProgram reports whether path is one programs call, which
// guard.program checks instead of guard.wrap.
func isProgram(path string) bool {
	return strings.HasPrefix(path, HooksPath) || path == MCPPath
}

// program returns next behind the checks for programs (an agent's HTTP
// hooks, an MCP client), which keep no cookie: the Host header as for
// the pages (a DNS-rebinding page names its own host); the token in an
// Authorization: Bearer header or the URL's token parameter (kept in
// the URL: crew serve prints the MCP endpoint's URL with it, and a
// program is no browser with a history to leak it to); an Origin
// header, which browsers send and programs do not, must be the address
// served (a page of another site gets 403).
func (g *guard) program(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if !g.hosts[strings.ToLower(r.Host)] {
			refuse(w, http.StatusMisdirectedRequest, "crew serve: host "+strconv.Quote(r.Host)+" is not the address served")
			return
		}
		t := r.URL.Query().Get("token")
		if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			t = strings.TrimSpace(b)
		}
		if !same(t, g.token) {
			refuse(w, http.StatusUnauthorized, "crew serve: no valid token: send Authorization: Bearer TOKEN (crew setup --http reads it from CREW_TOKEN) or the URL crew serve printed")
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			u, err := url.Parse(origin)
			if err != nil || !g.hosts[strings.ToLower(u.Host)] {
				refuse(w, http.StatusForbidden, "crew serve: origin "+strconv.Quote(origin)+" is not the address served")
				return
			}
		}
		if r.Method == http.MethodPost && r.Body != nil && r.Body != http.NoBody {
			// The body must come within bodyTimeout: one that trickles
			// would hold the connection forever. Not a server-wide
			// ReadTimeout: an MCP session's stream lasts.
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(bodyTimeout)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// bodyTimeout is how long crew serve waits for the body of an HTTP
// hook or an MCP request once its headers came.
var bodyTimeout = 30 * time.Second

// deadlineBody is a request body read under a read deadline, which it
// clears once the body was read to its end: the connection then serves
// the answer (an MCP stream) as long as it takes.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
