package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew/app"
)

// addTaskTools registers the tools that add, move and read tasks: add,
// start, complete, fail, cancel, retry, verify, list and show. Each
// tool's input is the app request, its output the task record (app.TaskRecord).
func addTaskTools(s *mcp.Server, a *app.App) {
	tool(s, "crew_task_add", "Add a pending task to the run (leader). Returns the task.",
		taskSchema, a.TaskAdd)
	tool(s, "crew_task_start", "Start a pending task (a worker, before it works on it). Returns the task.",
		taskSchema, a.TaskStart)
	tool(s, "crew_task_complete", "Complete a running task: its done-when check (if any) must pass first, else the call fails with class conflict and the check's output. Returns the task.",
		taskSchema, a.TaskComplete)
	tool(s, "crew_task_fail", "Fail a task that has not ended (a worker that cannot do it, or the leader), with a reason. Returns the task.",
		taskSchema, a.TaskFail)
	tool(s, "crew_task_cancel", "Cancel a task that has not ended (leader), with a reason. Returns the task.",
		taskSchema, a.TaskCancel)
	tool(s, "crew_task_retry", "Put a failed or cancelled task back to pending (leader). Returns the task.",
		taskSchema, a.TaskRetry)
	tool(s, "crew_task_verify", "Run a task's done-when check without completing it. Returns the check's result (command, exitCode, output).",
		objectSchema, a.TaskVerify)
	partial(s, "crew_task_list", "List the run's tasks with their status (pending, running, waiting, completed, failed, cancelled).",
		listSchema("tasks", taskSchema), func(ctx context.Context, in app.TaskList) (map[string][]app.TaskRecord, error) {
			recs, err := a.TaskList(ctx, in)
			return list("tasks", recs), err
		}, emptyList)
	partial(s, "crew_task_show", "Show one task: status, agent, title, done-when, open question.",
		taskSchema, a.TaskShow, isNil)
}
