package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
