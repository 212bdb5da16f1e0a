package mcpserver

import (
	"context"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
)

// progress sends a progress notification for token every interval until
// stop is called, and returns stop.
func progress(ctx context.Context, ss *mcp.ServerSession, token any, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		start := time.Now()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n),
					Message: "waiting for the leader's response for " + time.Since(start).Round(time.Second).String()})
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Output schemas. The records are those of docs/cli.md (--json output);
// these schemas name their fields for a client, and are loose where the
// shape is the command's to define.
var (
	objectSchema  = map[string]any{"type": "object"}
	messageSchema = map[string]any{"type": "object", "description": "a message: id, seq, run, task, kind, direction, from, to, body, priority, status, sentAt, deliveredAt, acknowledgedAt (docs/cli.md)",
		"required": []string{"id", "seq", "kind", "from", "to", "body", "status"}}
	taskSchema = map[string]any{"type": "object", "description": "a task: id, title, agent, status, createdAt, updatedAt, doneWhen, question, questions, attempts (docs/cli.md)",
		"required": []string{"id", "status"}}
)

// listSchema is the schema of a list tool's output: the records under key.
func listSchema(key string, item map[string]any) map[string]any {
	return map[string]any{"type": "object", "required": []string{key},
		"properties": map[string]any{key: map[string]any{"type": "array", "items": item}}}
}

// partial registers a tool like tool, for an operation that returns what
// it could read with its error (run wait's record of a run that did not
// complete, a list read past damage): the error result names the error,
// then each thing that could not be read (app.Unreadable), then the
// record as text, as the command line prints it before failing.
// empty tells that an operation returned nothing.
func partial[In, Out any](s *mcp.Server, name, desc string, out map[string]any, op func(context.Context, In) (Out, error), empty func(Out) bool) {
	mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc, OutputSchema: out},
		func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
			v, err := op(ctx, in)
			res, raw, rerr := result(ctx, v, err)
			if err == nil || res == nil {
				return res, raw, rerr
			}
			var u *app.Unreadable
			if errors.As(err, &u) {
				for _, e := range u.Errs {
					res.Content = append(res.Content, &mcp.TextContent{Text: "crew: " + crew.Message(e)})
				}
			}
			if !empty(v) {
				if rec, merr := events.Marshal(v); merr == nil {
					res.Content = append(res.Content, &mcp.TextContent{Text: "printed before the error:\n" + string(rec)})
				}
			}
			return res, nil, nil
		})
}

// isNil tells partial that an operation returned no record.
func isNil[T any](v *T) bool { return v == nil }

// emptyList tells partial that a list tool's output holds no record.
func emptyList[T any](v map[string][]T) bool {
	for _, recs := range v {
		if len(recs) > 0 {
			return false
		}
	}
	return true
}
