package state

import (
	"testing"

	"github.com/crew-dev/crew/events"
)

// TestLookup finds a participant's own copy of a broadcast before a
// message of the same id, and allocates nothing to look either up
// (marking a reader's 100,000 messages delivered looks each up).
func TestLookup(t *testing.T) {
	s := New()
	own := &Open{ID: "m1", Task: "t1"}
	copy := &Open{ID: "b1", Task: "t2"}
	s.Open["m1"] = own
	s.Open[Key("b1", events.Broadcast, "t2")] = copy
	if o, k := s.Lookup("m1", "t1"); o != own || k != "m1" {
		t.Errorf("Lookup(m1, t1) = %v, %q", o, k)
	}
	if o, k := s.Lookup("b1", "t2"); o != copy || k != "b1@t2" {
		t.Errorf("Lookup(b1, t2) = %v, %q", o, k)
	}
	if o, _ := s.Lookup("b1", "t3"); o != nil {
		t.Errorf("Lookup(b1, t3) = %v, want none", o)
	}
	const id = "01a24302-df25-7be5-8548-cfb8161da47d" // an id as crew makes them: its key with a task is too long for Go's own stack buffer
	s.Open[id] = own
	if n := testing.AllocsPerRun(100, func() { s.Lookup(id, "worker-task-1") }); n != 0 {
		t.Errorf("Lookup of a message allocates %v times, want 0", n)
	}
}
