package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// TestReorder pins where reorder puts each argument: global flags first,
// then the command path, then the command's flags (with their values),
// then "--" and the positional arguments.
func TestReorder(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"task list --json", "--json task list"},
		{"--json task list", "--json task list"},
		{"task --json list", "--json task list"},
		{"--run r1 task list", "task list --run r1"},
		{"ask Which --priority high --wait", "ask --priority high --wait -- Which"},
		{"steer t1 -- -v", "steer -- t1 -v"},
		{"steer -- t1 -x", "steer -- t1 -x"},
		{"steer t1 -x body", "steer -x -- t1 body"},
		{"--dir /tmp/x run create --id=r1", "--dir /tmp/x run create --id=r1"},
		{"--json=false inbox --task t1 --unread", "--json=false inbox --task t1 --unread"},
		{"task add --help t1", "task add --help"},
		{"task add t1 -h", "task add -h"},
		{"run wait r1 --timeout 30m", "run wait --timeout 30m -- r1"},
		{"events --type task.waiting -f", "events --type task.waiting -f"},
		{"nudge t1 run", "nudge -- t1 run"},
		{"--version", "--version"},
		{"watch --agent t1 --exec cmd --count 1", "watch --agent t1 --exec cmd --count 1"},
		{"mail send --to r --from b body", "mail send --to r --from b -- body"},
	} {
		app := newApp(nil, io.Discard, io.Discard)
		got := strings.Join(reorder(app, strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("reorder(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	app := newApp(nil, io.Discard, io.Discard)
	if got := reorder(app, []string{"report", "a b", "--priority", "urgent"}); !slices.Equal(got, []string{"report", "--priority", "urgent", "--", "a b"}) {
		t.Errorf("reorder kept spaces wrong: %q", got)
	}
}
