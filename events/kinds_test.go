package events

import (
	"testing"

	"github.com/crew-dev/crew/task"
)

// TestKindTable checks the table of kinds against Kinds and against the
// rules docs/concepts.md states for each kind.
func TestKindTable(t *testing.T) {
	if len(kinds) != len(Kinds) {
		t.Fatalf("%d kinds in the table, %d in Kinds", len(kinds), len(Kinds))
	}
	for i, kind := range Kinds {
		k, ok := KindOf(kind)
		if !ok || k != kinds[i] {
			t.Errorf("KindOf(%q) = %+v, %v; want the table's row %d", kind, k, ok, i)
		}
		if k.Sender == SenderCrew {
			// Crew's kinds: no verb, to the leader, with a transition.
			if k.Verb != "" || k.Direction != Outbox || k.Op == "" || k.Event == MessageSent {
				t.Errorf("%s: crew's kind with verb %q, direction %s, op %q, event %s", kind, k.Verb, k.Direction, k.Op, k.Event)
			}
			continue
		}
		if v, ok := KindByVerb(k.Verb); !ok || v.Kind != kind {
			t.Errorf("KindByVerb(%q) = %+v, %v; want %s", k.Verb, v, ok, kind)
		}
		outbox := k.Direction == Outbox
		if outbox != (k.Sender == SenderWorker) {
			t.Errorf("%s: direction %s, sender %s", kind, k.Direction, k.Sender)
		}
		if (k.File == Steering) != (kind == KindSteer) || (k.File != Steering && k.File != k.Direction) {
			t.Errorf("%s: file %s, direction %s", kind, k.File, k.Direction)
		}
		if (k.Op == "") != (k.Event == MessageSent) {
			t.Errorf("%s: op %q, event %s", kind, k.Op, k.Event)
		}
	}
	if k, ok := KindByVerb(""); ok {
		t.Errorf("KindByVerb(\"\") = %+v: the kinds crew sends have no verb", k)
	}
	for kind, want := range map[string]task.Op{KindQuestion: task.Ask, KindResponse: task.Respond, KindFailure: task.Fail, KindTimeout: task.AskTimeout} {
		if k, _ := KindOf(kind); k.Op != want {
			t.Errorf("%s: op %q, want %q", kind, k.Op, want)
		}
	}
	if _, ok := KindOf("telegram"); ok {
		t.Error("KindOf knows an unknown kind")
	}
}

// TestMessageFileOfEachKind checks which mailbox file each kind goes to, and that
// a kind this version does not know goes by its direction.
func TestMessageFileOfEachKind(t *testing.T) {
	for kind, want := range map[string]string{KindQuestion: "outbox", KindResponse: "inbox", KindSteer: "steering",
		KindFollowUp: "inbox", KindNudge: "inbox", KindReport: "outbox", KindMessage: "inbox",
		KindFailure: "outbox", KindTimeout: "outbox"} {
		if got := (&Message{Kind: kind}).File(); got != want {
			t.Errorf("file of a %s = %q, want %q", kind, got, want)
		}
	}
	if got := (&Message{Kind: "telegram", Direction: Outbox}).File(); got != Outbox {
		t.Errorf("file of an unknown kind = %q, want its direction", got)
	}
}
