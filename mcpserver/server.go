// Package mcpserver is crew as a Model Context Protocol server: every
// operation a leader or a worker has on the command line is a tool with
// the command's name (crew steer is crew_steer, crew task add is
// crew_task_add), its meaning and, as structured output, what the
// command prints with --json.
//
// The package holds no rule of crew's. A tool's input is the request of
// an operation of package app and its structured output the record the
// operation returns (tasks.go, runs.go, messages.go, read.go), so
// identity (the server's --run, --task, --as and CREW_*), validation,
// defaults and the records are app's, not a copy of them; the two
// resources (crew://inbox, crew://pending) read through app too. What
// this package adds is what only MCP has: input schemas, descriptions,
// lists gathered into one object, errors as tool results (isError)
// naming the exit-code class, progress notifications while crew_ask
// waits, and resources whose subscribers hear when they change
// (Server.Changed).
//
// Protocol and SDK: https://modelcontextprotocol.io/specification and
// github.com/modelcontextprotocol/go-sdk (mcp.AddTool: schemas from the
// input structs' json and jsonschema tags).
package mcpserver

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
)

// Error is a failed tool call: Class is the exit-code class of
// docs/cli.md (invalid, conflict, not_found, timeout, incomplete,
// damaged, tampered, io; interrupted for a call the client cancelled),
// Exit the exit code the command line would return (crew.Code),
// Message the error's text.
type Error struct {
	Class   string
	Exit    int
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (exit %d): %s", e.Class, e.Exit, e.Message)
}

// Options configure a Server.
type Options struct {
	// App carries out every tool call and reads the resources
	// (required): its Identity is the server's.
	App *app.App
	// Version is reported to clients in the initialize result.
	Version string
	// Task is the task the server acts for (its --task or CREW_TASK), ""
	// for a leader's server: a worker's server lists the crew://inbox
	// resource.
	Task string
	// ProgressEvery is the interval of the progress notifications
	// crew_ask sends while it waits (default 5 s: clients that give up on
	// a call idle for 10 s or more keep waiting).
	ProgressEvery time.Duration
}

// DefaultProgressEvery is Options.ProgressEvery's default.
const DefaultProgressEvery = 5 * time.Second

// Server is an MCP server with every crew tool and resource. Serve it
// with server.Run(ctx, &mcp.StdioTransport{}).
type Server struct {
	*mcp.Server
	watch *watch
	app   *app.App // Options.App
	task  string   // Options.Task
}

// New returns a Server for o.
func New(o Options) *Server {
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = DefaultProgressEvery
	}
	w := newWatch(o)
	s := mcp.NewServer(&mcp.Implementation{Name: "crew", Title: "crew: leader and worker agents through durable mailboxes", Version: o.Version},
		&mcp.ServerOptions{Instructions: instructions, SubscribeHandler: w.subscribe, UnsubscribeHandler: w.unsubscribe})
	w.add(s)
	s.AddReceivingMiddleware(refuseInvalidUTF8)
	addTaskTools(s, o.App)
	addRunTools(s, o.App)
	addMessageTools(s, o.App, o)
	addReadTools(s, o.App)
	return &Server{Server: s, watch: w, app: o.App, task: o.Task}
}

// refuseInvalidUTF8 answers a tool call whose arguments are not valid
// UTF-8 with an error result (invalid) before they are decoded: decoding
// would replace each bad byte with U+FFFD, and a message body would be
// stored altered, where run refuses a body that is not valid UTF-8
// (crew's rule, docs/files.md, Body limit) as the command line does.
func refuseInvalidUTF8(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && !utf8.Valid(p.Arguments) {
			res, _, _ := result[any](ctx, nil, fmt.Errorf("%s: the arguments are not valid UTF-8; crew stores bodies and titles byte for byte and refuses to alter them: %w", p.Name, crew.ErrInvalid))
			return res, nil
		}
		return next(ctx, method, req)
	}
}

// Changed re-reads every resource a client subscribed to and sends
// notifications/resources/updated for each whose content changed. Call
// it each time the run's log may have grown (cmd/crew calls it from the
// run's watch, the wake its own waits use); with no subscription it
// reads nothing. The error names the resources that could not be read.
func (s *Server) Changed(ctx context.Context) error { return s.watch.changed(ctx) }

// instructions is what a client may show its model about the server as a
// whole.
const instructions = `crew coordinates a leader agent and worker agents through durable mailboxes.
A worker (this server started with --task or CREW_TASK) calls crew_task_start, then works; at each safe point (after a step, before a long one) it calls crew_inbox and acts on steers first, acknowledging what it has acted on with crew_ack; when it needs a decision it calls crew_ask with wait=true and follows the answer; it tells the leader things with crew_report and ends with crew_task_complete (or crew_task_fail).
A leader creates a run and tasks (crew_run_create, crew_task_add), watches crew_pending for waiting tasks and reports, answers with crew_respond, and redirects workers with crew_steer (read at their next safe point), crew_follow_up (after their current step) and crew_nudge (ask a quiet worker for status).
Errors name their class: invalid, conflict (not allowed in the task's current state), not_found, timeout, incomplete, damaged, io.
Clients name these tools their own way: Claude Code shows them as mcp__crew__crew_ask, mcp__crew__crew_inbox and so on, and may defer them: if they are not in your tool list, load them with its ToolSearch tool (query: crew) before the first call.`
