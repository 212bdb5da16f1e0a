package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The inputs of the tools. Field tags give the JSON names and, in
// jsonschema, the description an agent reads; a field without omitempty
// is required.

// RunInput names the run a tool acts in.
type RunInput struct {
	Run string `json:"run,omitempty" jsonschema:"the run id (default: the server's --run or CREW_RUN, else the most recently created run)"`
}

// TaskAddInput is crew_task_add's input.
type TaskAddInput struct {
	RunInput
	ID       string `json:"id" jsonschema:"the new task's id: letters, digits, dot, dash, underscore"`
	Title    string `json:"title,omitempty" jsonschema:"a one-line title: what the worker is to do"`
	Agent    string `json:"agent,omitempty" jsonschema:"the worker agent's name (default: the task id)"`
	DoneWhen string `json:"done_when,omitempty" jsonschema:"a shell command that must exit 0 before the task may complete (e.g. go test ./...)"`
}

// TaskInput names a task (default: the server's own).
type TaskInput struct {
	RunInput
	Task string `json:"task,omitempty" jsonschema:"the task id (default: the server's --task or CREW_TASK)"`
}

// TaskReasonInput is a transition with a reason.
type TaskReasonInput struct {
	TaskInput
	Reason string `json:"reason,omitempty" jsonschema:"why"`
}

// TaskCompleteInput is crew_task_complete's input.
type TaskCompleteInput struct {
	TaskInput
	DoneTimeout string `json:"done_timeout,omitempty" jsonschema:"bound on the task's done-when check (default 10m)"`
}

// RunCreateInput is crew_run_create's input.
type RunCreateInput struct {
	ID     string `json:"id,omitempty" jsonschema:"the run id (default: generated, sortable by creation time)"`
	Title  string `json:"title,omitempty" jsonschema:"a one-line title"`
	Leader string `json:"leader,omitempty" jsonschema:"the leader agent's name (default: leader)"`
}

// RunWaitInput is crew_run_wait's input.
type RunWaitInput struct {
	RunInput
	Timeout string `json:"timeout,omitempty" jsonschema:"give up after this duration (e.g. 30m); the call fails with class timeout"`
}

// RunReportInput is crew_run_report's input.
type RunReportInput struct {
	RunInput
	Format string `json:"format,omitempty" jsonschema:"json (default: structured), markdown, junit or mermaid (text)"`
}

// MailSendInput is crew_mail_send's input.
type MailSendInput struct {
	To              string `json:"to" jsonschema:"the recipient agent"`
	From            string `json:"from,omitempty" jsonschema:"the sending agent (default: the server's --as or CREW_AGENT, else leader)"`
	Type            string `json:"type,omitempty" jsonschema:"work_assignment, completion_report, merge_notification, health_escalation or coordination (default)"`
	Subject         string `json:"subject,omitempty" jsonschema:"a one-line subject (default: the body's first line)"`
	Body            string `json:"body" jsonschema:"the message text"`
	Priority        string `json:"priority,omitempty" jsonschema:"low, normal (default), high or urgent"`
	CreateRecipient bool   `json:"create_recipient,omitempty" jsonschema:"create the recipient's mailbox if it has none"`
}

// MailCheckInput is crew_mail_check's input.
type MailCheckInput struct {
	Agent    string `json:"agent,omitempty" jsonschema:"the agent whose mail to list (default: the server's --as, else every agent)"`
	Unread   bool   `json:"unread,omitempty" jsonschema:"only unread mail"`
	Archived bool   `json:"archived,omitempty" jsonschema:"include archived mail"`
}

// MailReadInput is crew_mail_read's input.
type MailReadInput struct {
	Agent string   `json:"agent" jsonschema:"the agent whose mail it is"`
	IDs   []string `json:"ids" jsonschema:"the ids of the mail to read (and mark read)"`
}

// NoInput is the input of a tool that takes nothing.
type NoInput struct{}

// runCall starts the command line of a run-scoped command.
func runCall(in RunInput, path ...string) call {
	c := call{args: path}
	c.flag("run", in.Run)
	return c
}

// addTools registers every tool on s.
func addTools(s *mcp.Server, o Options) {
	// Tasks.
	add(s, o, "crew_task_add", "Add a pending task to the run (leader). Returns the task.",
		"", taskSchema, func(in TaskAddInput) call {
			c := runCall(in.RunInput, "task", "add")
			c.flag("title", in.Title)
			c.flag("agent", in.Agent)
			c.flag("done-when", in.DoneWhen)
			c.pos = append(c.pos, in.ID)
			return c
		})
	transition := func(op, desc string) {
		add(s, o, "crew_task_"+op, desc, "", taskSchema, func(in TaskReasonInput) call {
			c := runCall(in.RunInput, "task", op)
			c.flag("reason", in.Reason)
			if in.Task != "" {
				c.pos = append(c.pos, in.Task)
			}
			return c
		})
	}
	add(s, o, "crew_task_start", "Start a pending task (a worker, before it works on it). Returns the task.",
		"", taskSchema, func(in TaskInput) call { return taskCall(in, "start") })
	add(s, o, "crew_task_complete", "Complete a running task: its done-when check (if any) must pass first, else the call fails with class conflict and the check's output. Returns the task.",
		"", taskSchema, func(in TaskCompleteInput) call {
			c := taskCall(in.TaskInput, "complete")
			c.flag("done-timeout", in.DoneTimeout)
			return c
		})
	transition("fail", "Fail a task that has not ended (a worker that cannot do it, or the leader), with a reason. Returns the task.")
	transition("cancel", "Cancel a task that has not ended (leader), with a reason. Returns the task.")
	transition("retry", "Put a failed or cancelled task back to pending (leader). Returns the task.")
	add(s, o, "crew_task_verify", "Run a task's done-when check without completing it. Returns the check's result (command, exitCode, output).",
		"", objectSchema, func(in TaskInput) call { return taskCall(in, "verify") })
	add(s, o, "crew_task_list", "List the run's tasks with their status (pending, running, waiting, completed, failed, cancelled).",
		"tasks", listSchema("tasks", taskSchema), func(in RunInput) call { return runCall(in, "task", "list") })
	add(s, o, "crew_task_show", "Show one task: status, agent, title, done-when, open question.",
		"", taskSchema, func(in TaskInput) call { return taskCall(in, "show") })

	// Runs.
	add(s, o, "crew_run_create", "Create a run (the leader's first step); tasks are added to it with crew_task_add. Returns the run's manifest.",
		"", objectSchema, func(in RunCreateInput) call {
			c := call{args: []string{"run", "create"}}
			c.flag("id", in.ID)
			c.flag("title", in.Title)
			c.flag("leader", in.Leader)
			return c
		})
	add(s, o, "crew_run_list", "List the runs of the state root, oldest first, each with a summary of its tasks.",
		"runs", listSchema("runs", objectSchema), func(NoInput) call { return call{args: []string{"run", "list"}} })
	add(s, o, "crew_run_show", "Show a run: its manifest, a summary and its tasks.",
		"", objectSchema, func(in RunInput) call { return runCall(in, "run", "show") })
	add(s, o, "crew_run_wait", "Block until every task of the run has ended; fails with class incomplete when one failed or was cancelled, timeout after the timeout. Returns the run.",
		"", objectSchema, func(in RunWaitInput) call {
			c := runCall(in.RunInput, "run", "wait")
			c.flag("timeout", in.Timeout)
			return c
		})
	addRunReport(s, o)
	// Mail outside runs.
	add(s, o, "crew_mail_send", "Deliver a message to an agent's mailbox in the per-agent mail tree (outside runs). Returns the mail.",
		"", objectSchema, func(in MailSendInput) call {
			c := call{args: []string{"mail", "send"}}
			c.flag("to", in.To)
			c.flag("from", in.From)
			c.flag("type", in.Type)
			c.flag("subject", in.Subject)
			c.flag("priority", in.Priority)
			c.boolFlag("create-recipient", in.CreateRecipient)
			c.body(in.Body)
			return c
		})
	add(s, o, "crew_mail_check", "List an agent's mail (all agents when none is named) without marking it read.",
		"mail", listSchema("mail", objectSchema), func(in MailCheckInput) call {
			c := call{args: []string{"mail", "check"}}
			c.boolFlag("unread", in.Unread)
			c.boolFlag("archived", in.Archived)
			if in.Agent != "" {
				c.pos = append(c.pos, in.Agent)
			}
			return c
		})
	add(s, o, "crew_mail_read", "Read an agent's mail by id, and mark it read.",
		"mail", listSchema("mail", objectSchema), func(in MailReadInput) call {
			c := call{args: []string{"mail", "read"}}
			c.pos = append(append(c.pos, in.Agent), in.IDs...)
			return c
		})
}

// taskCall is the command line of a task command that names its task as
// an optional argument.
func taskCall(in TaskInput, op string) call {
	c := runCall(in.RunInput, "task", op)
	if in.Task != "" {
		c.pos = append(c.pos, in.Task)
	}
	return c
}

// add registers a tool whose call is argv(input) and whose structured
// output is what the command prints (output, with list).
func add[In any](s *mcp.Server, o Options, name, desc, list string, out map[string]any, argv func(In) call) {
	mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc, OutputSchema: out},
		func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
			c := argv(in)
			return execResult(o.Exec(ctx, c.line(), c.stdin))(list)
		})
}

// execResult turns what Exec returned into a tool result: the structured
// output, or an error result (isError) whose text is the error and what
// the command printed before it failed.
func execResult(stdout []byte, err error) func(list string) (*mcp.CallToolResult, any, error) {
	return func(list string) (*mcp.CallToolResult, any, error) {
		if err != nil {
			res := &mcp.CallToolResult{}
			res.SetError(err)
			if len(stdout) > 0 {
				res.Content = append(res.Content, &mcp.TextContent{Text: "printed before the error:\n" + string(stdout)})
			}
			return res, nil, nil
		}
		raw, err := output(stdout, list)
		if err != nil {
			return nil, nil, err
		}
		return nil, raw, nil
	}
}

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

// addRunReport registers crew_run_report: json (the default here) is
// structured output; markdown, junit and mermaid are text.
func addRunReport(s *mcp.Server, o Options) {
	mcp.AddTool(s, &mcp.Tool{Name: "crew_run_report",
		Description: "A report of the run: json (default: every task with its status, timings, questions and messages), markdown (a summary), junit (XML for test reporters) or mermaid (a sequence diagram)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in RunReportInput) (*mcp.CallToolResult, any, error) {
			format := in.Format
			if format == "" {
				format = "json"
			}
			c := runCall(in.RunInput, "run", "report")
			c.flag("format", format)
			stdout, err := o.Exec(ctx, c.line(), "")
			if err != nil || format == "json" {
				return execResult(stdout, err)("")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(stdout)}}}, nil, nil
		})
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
