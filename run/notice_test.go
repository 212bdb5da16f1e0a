package run

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
)

// A failure's body says which task failed and why; a reason longer than
// noticeQuote is cut at a character boundary, saying where the rest is;
// no reason is said to be none.
func TestFailureNoticeBody(t *testing.T) {
	st := &state.State{Leader: "lead"}
	tk := &state.Task{ID: "t1"}
	m := failureNotice("id1", st, tk, "disk full\nits output ended with:\nENOSPC")
	if m.Body != "task t1 failed: disk full\nits output ended with:\nENOSPC" || m.Kind != events.KindFailure || m.From != state.CrewActor ||
		m.To != "lead" || m.Task != "t1" || m.Direction != events.Outbox || m.Priority != events.PriorityHigh {
		t.Fatalf("failure notice %+v", m)
	}
	if m := failureNotice("id2", st, tk, " "); m.Body != "task t1 failed (no reason given)" {
		t.Fatalf("no reason: %q", m.Body)
	}
	long := strings.Repeat("é", noticeQuote) // 2 bytes each: the cut falls inside none
	m = failureNotice("id3", st, tk, long)
	if !utf8.ValidString(m.Body) || !strings.HasSuffix(m.Body, "… (cut: crew task show t1 has the whole reason)") || len(m.Body) > noticeQuote+200 {
		t.Fatalf("a long reason: %d bytes, ends %q", len(m.Body), m.Body[len(m.Body)-60:])
	}
	q := &events.Message{Body: "Which DB?"}
	if m := timeoutNotice("id4", st, tk, "q1", q); m.Body != "question q1 of task t1 timed out unanswered; its worker went on without an answer. It asked:\nWhich DB?" ||
		m.Kind != events.KindTimeout || m.Priority != events.DefaultPriority {
		t.Fatalf("timeout notice %+v", m)
	}
	if m := timeoutNotice("id5", st, tk, "q1", nil); strings.Contains(m.Body, "asked") {
		t.Fatalf("a question not found is named by its id only: %q", m.Body)
	}
}
