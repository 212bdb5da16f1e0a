package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
)

// addMessageTools registers the tools that send messages: a worker's
// ask, await and report, the leader's respond, steer, follow-up, nudge
// and broadcast. Each tool's input is the app request.
func addMessageTools(s *mcp.Server, a *app.App, o Options) {
	addAsk(s, a, o)
	tool(s, "crew_await", "Wait for the leader's response to a question asked before (crew_ask without wait, or after a restart while waiting). Returns the response message; it is acknowledged.",
		messageSchema, func(ctx context.Context, in app.Await) (*events.Message, error) { return a.Await(ctx, in, nil) })
	tool(s, "crew_report", "Tell the leader something without waiting (worker): progress, a finding, a blocker (priority urgent for what cannot wait). Returns the report message.",
		messageSchema, a.Report)
	tool(s, "crew_respond", "Answer a waiting task's open question and unblock its worker (leader). Fails with class conflict when the task is not waiting. Returns the response message.",
		messageSchema, a.Respond)
	tool(s, "crew_steer", "Redirect a worker (leader): it reads the steer at its next safe point (its next tool call, with crew hooks) and acts on it before going on. Returns the message.",
		messageSchema, a.Steer)
	tool(s, "crew_follow_up", "Queue work for a worker (leader), for after its current step: it is shown when the worker would stop. Returns the message.",
		messageSchema, a.FollowUp)
	tool(s, "crew_nudge", "Ask a quiet worker to report its status, blocker or next step (leader). Returns the message.",
		messageSchema, a.Nudge)
	tool(s, "crew_broadcast", "Send a message to every task of the run that has not ended (leader). Returns the message.",
		messageSchema, a.Broadcast)
}

// addAsk registers crew_ask: with wait it blocks, sending a progress
// notification every o.ProgressEvery when the client gave a progress
// token, until the response, the timeout or the client's cancellation
// (notifications/cancelled cancels ctx; the question stays open, as when
// crew ask --wait is interrupted).
func addAsk(s *mcp.Server, a *app.App, o Options) {
	mcp.AddTool(s, &mcp.Tool{Name: "crew_ask",
		Description:  "Ask the leader a question (worker). With wait=true (recommended) the call blocks until the leader responds and returns the response message (acknowledged); follow it. Without wait it returns the question message at once; crew_await waits for the answer later. Progress notifications are sent while it waits.",
		OutputSchema: messageSchema},
		func(ctx context.Context, req *mcp.CallToolRequest, in app.Ask) (*mcp.CallToolResult, any, error) {
			if in.Wait {
				if token := req.Params.GetProgressToken(); token != nil {
					stop := progress(ctx, req.Session, token, o.ProgressEvery)
					defer stop()
				}
			}
			m, err := a.Ask(ctx, in, nil)
			return result(ctx, m, err)
		})
}

// tool registers a tool whose input is an app request and whose
// structured output is the record op returns, as `crew --json` prints it.
func tool[In, Out any](s *mcp.Server, name, desc string, out map[string]any, op func(context.Context, In) (Out, error)) {
	mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc, OutputSchema: out},
		func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
			v, err := op(ctx, in)
			return result(ctx, v, err)
		})
}

// result is a tool's result: the record v, marshalled as the command
// line prints it (events.Marshal), or an error result (isError) naming
// err's class (crew.Code), "interrupted" when the call was cancelled.
//
// A record that is a JSON object is the result's structured content and
// its text as it is: the SDK, given it as the tool's output, would
// marshal it again, decode it to check it against the tool's output
// schema and marshal that once more, at every call (about a tenth of
// crew serve's CPU for a steer over HTTP), and hand out its keys sorted
// and < > & escaped.
// The records are Go types of crew's own, which the output schemas
// describe; TestToolOutputs checks them against the schemas.
func result[Out any](ctx context.Context, v Out, err error) (*mcp.CallToolResult, any, error) {
	if err != nil {
		exit, class := crew.Code(err)
		msg := crew.Message(err)
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			class, msg = "interrupted", "the call was cancelled; "+msg
		}
		res := &mcp.CallToolResult{}
		res.SetError(&Error{Class: class, Exit: exit, Message: msg})
		return res, nil, nil
	}
	raw, err := events.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	raw = bytes.TrimSuffix(raw, []byte("\n"))
	if len(raw) == 0 || raw[0] != '{' {
		return nil, json.RawMessage(raw), nil // not an object: the SDK's way
	}
	return &mcp.CallToolResult{StructuredContent: json.RawMessage(raw), Content: []mcp.Content{&mcp.TextContent{Text: string(raw)}}}, nil, nil
}
