package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mcpserver"
	"github.com/crew-dev/crew/run"
)

// session returns a client session of a crew MCP server (in memory) for
// run r1 of a new state root, acting as its leader.
func session(t *testing.T) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	root, err := run.Init(dir, crew.PrivatePerm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	if _, err := root.Create(run.CreateOptions{ID: "r1", Title: "test", Dir: dir}); err != nil {
		t.Fatal(err)
	}
	s := mcpserver.New(mcpserver.Options{App: app.New(func() (*run.Root, error) { return root, nil }, app.Identity{Run: "r1"}), Version: "test"})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestToolOutputs: a tool's result carries the record as the command
// line prints it with --json (events.Marshal: its fields in the record's
// order, < > & as they are), as text and as structured content, and the
// structured content is valid against the output schema tools/list
// gives (the SDK no longer checks each call's: crew hands it the record
// as it is).
func TestToolOutputs(t *testing.T) {
	ctx := context.Background()
	cs := session(t)
	schemas := map[string]*jsonschema.Resolved{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.OutputSchema == nil {
			continue
		}
		raw, err := json.Marshal(tool.OutputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: output schema: %v", tool.Name, err)
		}
		if schemas[tool.Name], err = s.Resolve(nil); err != nil {
			t.Fatalf("%s: output schema: %v", tool.Name, err)
		}
	}
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.IsError || len(res.Content) != 1 {
			t.Fatalf("%s: error result or not one content: %+v", name, res.Content)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		var got any
		if err := json.Unmarshal([]byte(text), &got); err != nil {
			t.Fatalf("%s: text %q: %v", name, text, err)
		}
		if s := schemas[name]; s == nil {
			t.Fatalf("%s: no output schema", name)
		} else if err := s.Validate(got); err != nil {
			t.Errorf("%s: output %s is not valid against its schema: %v", name, text, err)
		}
		structured, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		json.Unmarshal(structured, &a)
		json.Unmarshal([]byte(text), &b)
		if x, y := mustJSON(t, a), mustJSON(t, b); x != y {
			t.Errorf("%s: structured content %s differs from the text %s", name, x, y)
		}
		return res
	}
	call("crew_task_add", map[string]any{"id": "t1", "title": "a <task> & more"})
	call("crew_task_start", map[string]any{"task": "t1"})
	res := call("crew_steer", map[string]any{"task": "t1", "body": "use <b> & check"})
	text := res.Content[0].(*mcp.TextContent).Text
	var m events.Message
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatal(err)
	}
	want, err := events.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	if text != string(bytes.TrimSuffix(want, []byte("\n"))) {
		t.Errorf("crew_steer's text\n%s\nis not the record as crew steer --json prints it\n%s", text, want)
	}
	call("crew_task_list", nil)
	call("crew_task_show", map[string]any{"task": "t1"})
	call("crew_run_show", nil)
	call("crew_pending", nil)
}

// mustJSON marshals v (maps with their keys sorted).
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
