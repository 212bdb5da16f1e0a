package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/report"
)

// addRunTools registers the tools that create, list, show, wait for,
// stop and report on runs, and those of the mail tree outside runs (send, check,
// read). Each tool's input is the app request.
func addRunTools(s *mcp.Server, a *app.App) {
	tool(s, "crew_run_create", "Create a run (the leader's first step); tasks are added to it with crew_task_add. Returns the run's manifest.",
		objectSchema, a.RunCreate)
	partial(s, "crew_run_list", "List the runs of the state root, oldest first, each with a summary of its tasks.",
		listSchema("runs", objectSchema), func(ctx context.Context, in app.RunList) (map[string][]any, error) {
			runs, err := a.RunList(ctx, in)
			recs := make([]any, 0, len(runs))
			for _, l := range runs {
				recs = append(recs, l.Record())
			}
			return list("runs", recs), err
		}, emptyList)
	partial(s, "crew_run_show", "Show a run: its manifest, a summary and its tasks.",
		objectSchema, a.RunShow, isNil)
	partial(s, "crew_run_wait", "Block until every task of the run has ended; fails with class incomplete when one failed or was cancelled, timeout after the timeout, damaged when the log (read whole before the verdict) is damaged, conflict when the run has no tasks (unless allow_empty). Returns the run.",
		objectSchema, func(ctx context.Context, in app.RunWait) (*app.RunRecord, error) { return a.RunWait(ctx, in, nil) }, isNil)
	partial(s, "crew_run_stop", "End the run's work (leader): cancel every task that has not ended and stop every worker of the run (each worker's crew spawn sends its process group SIGTERM, then SIGKILL after its grace); returns once their exits are recorded: the tasks cancelled and each worker with how it exited. Fails with class timeout when workers still run then.",
		objectSchema, a.RunStop, isNil)
	addRunReport(s, a)

	tool(s, "crew_mail_send", "Deliver a message to an agent's mailbox in the per-agent mail tree (outside runs). Returns the mail.",
		objectSchema, a.MailSend)
	partial(s, "crew_mail_check", "List an agent's mail (all agents when none is named) without marking it read.",
		listSchema("mail", objectSchema), func(ctx context.Context, in app.MailCheck) (map[string][]app.Mail, error) {
			entries, err := a.MailCheck(ctx, in)
			return list("mail", mails(entries)), err
		}, emptyList)
	partial(s, "crew_mail_read", "Read an agent's mail by id, and mark it read.",
		listSchema("mail", objectSchema), func(ctx context.Context, in app.MailRead) (map[string][]app.Mail, error) {
			entries, err := a.MailRead(ctx, in)
			return list("mail", mails(entries)), err
		}, emptyList)
}

// mails are the messages of entries.
func mails(entries []app.MailEntry) []app.Mail {
	out := make([]app.Mail, 0, len(entries))
	for _, en := range entries {
		out = append(out, en.Mail)
	}
	return out
}

// addRunReport registers crew_run_report: json (the default here) is
// structured output; markdown, junit and mermaid are text.
func addRunReport(s *mcp.Server, a *app.App) {
	mcp.AddTool(s, &mcp.Tool{Name: "crew_run_report",
		Description: "A report of the run: json (default: every task with its status, timings, questions and messages), markdown (a summary), junit (XML for test reporters) or mermaid (a sequence diagram)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in app.RunReport) (*mcp.CallToolResult, any, error) {
			if in.Format == "" {
				in.Format = report.FormatJSON
			}
			var b bytes.Buffer
			if err := a.RunReport(ctx, in, &b); err != nil {
				return result[any](ctx, nil, err)
			}
			if in.Format == report.FormatJSON {
				return nil, json.RawMessage(bytes.TrimSpace(b.Bytes())), nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, nil, nil
		})
}
