package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
)

// addReadTools registers the tools that read what is open and say so: a
// worker's heartbeat and inbox, the leader's outbox, pending, ack and
// reject for either, and the run's events. Each tool's input is the app
// request.
func addReadTools(s *mcp.Server, a *app.App) {
	tool(s, "crew_heartbeat", "Say that you are alive and working (worker), without writing to the run's log: a long step with no other crew call keeps the leader from seeing you as quiet.",
		objectSchema, a.Heartbeat)
	tool(s, "crew_inbox", "Your messages from the leader not yet acknowledged (worker): steers (act on them first: they redirect your work), follow-ups (for after your current step), nudges (report your status with crew_report), responses and broadcasts. Call it at every safe point. Reading marks them delivered; acknowledge what you acted on with crew_ack.",
		listSchema("messages", messageSchema), func(ctx context.Context, in app.Read) (map[string][]events.Message, error) {
			return readMailbox(ctx, a.Inbox, in)
		})
	tool(s, "crew_outbox", "What workers sent the leader not yet acknowledged (leader): questions and reports. Reading marks them delivered; answer questions with crew_respond, acknowledge reports with crew_ack.",
		listSchema("messages", messageSchema), func(ctx context.Context, in app.Read) (map[string][]events.Message, error) {
			return readMailbox(ctx, a.Outbox, in)
		})
	tool(s, "crew_pending", "What is open for you, most urgent first, then oldest first, without marking anything delivered: for the leader, the workers' questions (kind question: the task waits for crew_respond) and reports not yet acknowledged, then quiet and dead tasks, then messages sent to workers and not delivered after undelivered_after (kind undelivered, with the likely reason); for a worker, its messages not yet acknowledged.",
		listSchema("pending", objectSchema), func(ctx context.Context, in app.Pending) (map[string][]any, error) {
			return pending(ctx, a, in)
		})
	tool(s, "crew_ack", "Acknowledge messages addressed to you (a worker: the server's task; else the leader) once you have acted on them, so they stop showing as open.",
		objectSchema, a.Ack)
	tool(s, "crew_reject", "Refuse a message addressed to you, with a reason the sender sees.",
		objectSchema, a.Reject)
	tool(s, "crew_events", "The run's event log, the source of truth: every task change and message, in order (seq).",
		listSchema("events", objectSchema), func(ctx context.Context, in app.Events) (map[string][]events.Event, error) {
			var evs []events.Event
			err := a.Events(ctx, in, nil, func(ev *events.Event) error {
				evs = append(evs, *ev)
				return nil
			})
			return list("events", evs), err
		})
}

// readMailbox reads the mailbox open opens for in, once, and returns its
// messages under "messages".
func readMailbox(ctx context.Context, open func(app.Read, func(error)) (*app.Mailbox, error), in app.Read) (map[string][]events.Message, error) {
	in.Via = events.ViaMCP
	mb, err := open(in, nil)
	if err != nil {
		return nil, err
	}
	defer mb.Close()
	var msgs []events.Message
	_, err = mb.Read(ctx, func(m *events.Message) error {
		msgs = append(msgs, *m)
		return nil
	})
	return list("messages", msgs), err
}

// pending is crew_pending's output and the resources' content: the open
// messages, then (the leader's) the tasks whose worker is quiet or dead,
// under "pending", as crew pending --json prints them.
func pending(ctx context.Context, a *app.App, in app.Pending) (map[string][]any, error) {
	open, err := a.Pending(ctx, in)
	if err != nil {
		return nil, err
	}
	recs := make([]any, 0, len(open.Messages)+len(open.Lifeless))
	for i := range open.Messages {
		recs = append(recs, &open.Messages[i])
	}
	for i := range open.Lifeless {
		recs = append(recs, &open.Lifeless[i])
	}
	for i := range open.Undelivered {
		recs = append(recs, &open.Undelivered[i])
	}
	return list("pending", recs), nil
}

// list is a list tool's output: the records under key, an empty array
// (not null) when there are none.
func list[T any](key string, recs []T) map[string][]T {
	if recs == nil {
		recs = []T{}
	}
	return map[string][]T{key: recs}
}
