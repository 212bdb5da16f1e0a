package task_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/task"
)

// allowed is the transition table of docs/state-machine.md written out independently of the package:
// from -> op -> to. Every pair missing here must be refused.
var allowed = map[task.State]map[task.Op]task.State{
	task.Pending: {
		task.Start:  task.Running,
		task.Fail:   task.Failed,
		task.Cancel: task.Cancelled,
	},
	task.Running: {
		task.Ask:      task.Waiting,
		task.Complete: task.Completed,
		task.Fail:     task.Failed,
		task.Cancel:   task.Cancelled,
		task.Restart:  task.Pending,
	},
	task.Waiting: {
		task.Respond:    task.Running,
		task.AskTimeout: task.Running,
		task.Fail:       task.Failed,
		task.Cancel:     task.Cancelled,
		task.Restart:    task.Pending,
	},
	task.Completed: {},
	task.Failed:    {task.Retry: task.Pending},
	task.Cancelled: {task.Retry: task.Pending},
}

func TestNextEveryPair(t *testing.T) {
	if len(task.States) != 6 || len(task.Ops) != 9 {
		t.Fatalf("got %d states and %d ops, want 6 and 9", len(task.States), len(task.Ops))
	}
	const id = "t1"
	n := 0
	for _, from := range task.States {
		for _, op := range task.Ops {
			n++
			t.Run(string(from)+"/"+string(op), func(t *testing.T) {
				got, err := task.Next(id, from, op)
				want, ok := allowed[from][op]
				if ok {
					if err != nil {
						t.Fatalf("Next(%s, %s) = %v, want %s", from, op, err, want)
					}
					if got != want {
						t.Fatalf("Next(%s, %s) = %s, want %s", from, op, got, want)
					}
					return
				}
				if err == nil {
					t.Fatalf("Next(%s, %s) = %s, want refusal", from, op, got)
				}
				if got != "" {
					t.Errorf("refused Next returned state %q, want \"\"", got)
				}
				var te *task.TransitionError
				if !errors.As(err, &te) {
					t.Fatalf("error %T %v is not a *TransitionError", err, err)
				}
				if te.Task != id || te.State != from || te.Op != op {
					t.Errorf("TransitionError = %+v, want {%s %s %s}", *te, id, from, op)
				}
				if !errors.Is(err, crew.ErrConflict) {
					t.Errorf("errors.Is(%v, ErrConflict) = false", err)
				}
				if errors.Is(err, crew.ErrInvalid) {
					t.Errorf("refusal %v also wraps ErrInvalid", err)
				}
				checkMessage(t, err.Error(), id, from)
			})
		}
	}
	if n != 54 {
		t.Fatalf("checked %d pairs, want 54", n)
	}
}

// checkMessage asserts the style of a refusal in docs/state-machine.md: it names the task and
// its state, gives a hint after ";", starts lower case and ends without
// punctuation (cmd/crew prefixes it with "crew: ").
func checkMessage(t *testing.T, msg, id string, from task.State) {
	t.Helper()
	if !strings.HasPrefix(msg, "task "+id+" is "+string(from)) {
		t.Errorf("message %q does not start with %q", msg, "task "+id+" is "+string(from))
	}
	if _, hint, ok := strings.Cut(msg, "; "); !ok || hint == "" {
		t.Errorf("message %q has no hint after \"; \"", msg)
	}
	if r := []rune(msg)[0]; unicode.IsUpper(r) {
		t.Errorf("message %q starts with a capital", msg)
	}
	if strings.ContainsAny(msg[len(msg)-1:], ".,;:!? \n") {
		t.Errorf("message %q ends with punctuation or space", msg)
	}
	if strings.Contains(msg, "%!") {
		t.Errorf("message %q has a formatting error", msg)
	}
}

func TestNextMessages(t *testing.T) {
	tests := []struct {
		from task.State
		op   task.Op
		want string
	}{
		{task.Running, task.Respond, "task t1 is running, not waiting; use follow-up or steer"},
		{task.Waiting, task.Ask, "task t1 is waiting, not running; it already has an open question (crew await QUESTION_ID waits for the answer)"},
		{task.Running, task.Start, "task t1 is running, not pending; it has already started"},
		{task.Waiting, task.Start, "task t1 is waiting, not pending; it has already started"},
		{task.Pending, task.Complete, "task t1 is pending, not running; start it first (crew task start t1)"},
		{task.Pending, task.Ask, "task t1 is pending, not running; start it before asking (crew task start t1)"},
		{task.Pending, task.Respond, "task t1 is pending, not waiting; it has no open question, so use follow-up or steer"},
		{task.Waiting, task.Complete, "task t1 is waiting, not running; its open question needs a response first (crew respond t1 BODY)"},
		{task.Completed, task.Complete, "task t1 is completed, which is final; nothing can change it"},
		{task.Completed, task.Retry, "task t1 is completed, which is final; nothing can change it"},
		{task.Completed, task.Cancel, "task t1 is completed, which is final; nothing can change it"},
		{task.Running, task.Retry, "task t1 is running, not failed or cancelled; only a failed or cancelled task can be retried"},
		{task.Pending, task.Retry, "task t1 is pending, not failed or cancelled; only a failed or cancelled task can be retried"},
		{task.Failed, task.Start, "task t1 is failed; use crew task retry t1 to run it again"},
		{task.Failed, task.Fail, "task t1 is failed; use crew task retry t1 to run it again"},
		{task.Cancelled, task.Respond, "task t1 is cancelled; use crew task retry t1 to run it again"},
		{task.Running, task.AskTimeout, "task t1 is running, not waiting; there is no question to time out"},
		{task.Pending, task.AskTimeout, "task t1 is pending, not waiting; there is no question to time out"},
	}
	for _, tt := range tests {
		_, err := task.Next("t1", tt.from, tt.op)
		if err == nil {
			t.Errorf("Next(%s, %s) succeeded, want %q", tt.from, tt.op, tt.want)
			continue
		}
		if got := err.Error(); got != tt.want {
			t.Errorf("Next(%s, %s):\n got %q\nwant %q", tt.from, tt.op, got, tt.want)
		}
	}
}

func TestNextInvalid(t *testing.T) {
	tests := []struct {
		from task.State
		op   task.Op
		want []string // substrings of the message
	}{
		{"done", task.Start, []string{"t1", `"done"`, "pending, running, waiting, completed, failed, cancelled"}},
		{"", task.Start, []string{"t1", `""`}},
		{"Running", task.Ask, []string{`"Running"`}},
		{task.Running, "finish", []string{"t1", `"finish"`, "start, ask, respond, ask-timeout, complete, fail, cancel, retry"}},
		{task.Running, "", []string{`""`}},
	}
	for _, tt := range tests {
		got, err := task.Next("t1", tt.from, tt.op)
		if err == nil {
			t.Errorf("Next(%q, %q) = %q, want error", tt.from, tt.op, got)
			continue
		}
		if !errors.Is(err, crew.ErrInvalid) {
			t.Errorf("Next(%q, %q) = %v, want ErrInvalid", tt.from, tt.op, err)
		}
		if errors.Is(err, crew.ErrConflict) {
			t.Errorf("Next(%q, %q) = %v, also wraps ErrConflict", tt.from, tt.op, err)
		}
		for _, s := range tt.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("Next(%q, %q) message %q lacks %q", tt.from, tt.op, err, s)
			}
		}
	}
}

func TestAllowedMatchesNext(t *testing.T) {
	for _, from := range task.States {
		var want []task.Op
		for _, op := range task.Ops {
			if _, err := task.Next("t1", from, op); err == nil {
				want = append(want, op)
			}
		}
		if got := task.Allowed(from); !slices.Equal(got, want) {
			t.Errorf("Allowed(%s) = %v, want %v", from, got, want)
		}
	}
	if got := task.Allowed(task.Completed); len(got) != 0 {
		t.Errorf("Allowed(completed) = %v, want none", got)
	}
	if got := task.Allowed("nonsense"); len(got) != 0 {
		t.Errorf("Allowed(nonsense) = %v, want none", got)
	}
	if got, want := task.Allowed(task.Waiting), []task.Op{task.Respond, task.AskTimeout, task.Fail, task.Cancel, task.Restart}; !slices.Equal(got, want) {
		t.Errorf("Allowed(waiting) = %v, want %v", got, want)
	}
}

func TestParseState(t *testing.T) {
	for _, s := range task.States {
		got, err := task.ParseState(string(s))
		if err != nil || got != s {
			t.Errorf("ParseState(%q) = %q, %v", s, got, err)
		}
	}
	for _, in := range []string{"", "done", "Running", " running", "cancel"} {
		got, err := task.ParseState(in)
		if err == nil {
			t.Errorf("ParseState(%q) = %q, want error", in, got)
			continue
		}
		if !errors.Is(err, crew.ErrInvalid) {
			t.Errorf("ParseState(%q) error %v does not wrap ErrInvalid", in, err)
		}
		for _, s := range task.States {
			if !strings.Contains(err.Error(), string(s)) {
				t.Errorf("ParseState(%q) error %q does not list %s", in, err, s)
			}
		}
	}
}

func TestTerminal(t *testing.T) {
	want := map[task.State]bool{
		task.Pending:   false,
		task.Running:   false,
		task.Waiting:   false,
		task.Completed: true,
		task.Failed:    true,
		task.Cancelled: true,
	}
	for _, s := range task.States {
		if got := s.Terminal(); got != want[s] {
			t.Errorf("%s.Terminal() = %v, want %v", s, got, want[s])
		}
	}
	if task.State("nonsense").Terminal() {
		t.Error(`State("nonsense").Terminal() = true`)
	}
	// A terminal task allows nothing but retry (docs/state-machine.md).
	for _, s := range task.States {
		if !s.Terminal() {
			continue
		}
		for _, op := range task.Allowed(s) {
			if op != task.Retry {
				t.Errorf("terminal %s allows %s", s, op)
			}
		}
	}
}
