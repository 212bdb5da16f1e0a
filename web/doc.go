// Package web is crew's live dashboard, served by crew serve: the HTTP
// server, its pages (runs, a run's board, timeline and event log, a
// task's thread), its actions (respond, steer, follow-up, nudge,
// broadcast, cancel, retry, acknowledge) and the server-sent events that
// keep open pages live. Templates, script and style are embedded
// (go:embed); nothing is built outside Go.
//
// Pages are built from a run's state (store.Log.State: the snapshot and
// the log after it) and cursors on its log, never by replaying it into
// memory; a thread and the timeline stream the log once. Each request
// opens its run through the root, whose store keeps one Log per run
// (run.FindKept): the server keeps no runs of its own. The actions that
// send a message (respond, steer, follow-up, nudge, broadcast) call
// package app's operations, as the command line and crew mcp do, with
// the same defaults, rules and errors; cancel, retry and acknowledge
// call package run's. Live updates follow the log with run.Run.Watch (fsnotify
// on files, a subscription on NATS), as crew events --follow does; a
// reconnecting page resumes after the seq in its Last-Event-ID.
//
// What a task is doing (working, quiet, waiting, dead) is the command
// line's rule, computed by package supervise (supervise.Liveness over
// run.LivenessOf); the streams of the board and a task's page look at it
// every second, since it changes with no event. Server.Supervise, which
// crew serve runs beside the server, reaps lost workers
// (supervise.ReapRoot). A task's page follows its worker's log on this
// machine (supervise.OpenWorkerLog).
//
// Security (docs/cli.md, crew serve): every request must carry the
// server's random token, first in the URL crew serve prints, then in an
// HttpOnly SameSite=Strict cookie; its Host header must name the address
// served (against DNS rebinding); state-changing requests are POST with
// a CSRF token and an Origin of the address served. Every page is sent
// with a Content-Security-Policy that allows no inline script, and
// everything shown is escaped by html/template for its context.
//
// Beside the pages, the server answers programs (api.go): agents' HTTP
// hooks at HooksPath (hookHandler, hooks.go: the command hooks'
// translation and records) and crew's MCP tools over Streamable HTTP at
// MCPPath (mcpserver.New, the go-sdk's StreamableHTTPHandler, one server
// per identity, fixed when a session starts). They keep no cookie: the
// token comes in an Authorization: Bearer header or the URL's token
// parameter; the Host check is the pages'; an Origin header, which only
// browsers send, must name the address served.
package web
