// Package statetest holds what the stores' tests share about a run's
// state: one with every field set (Full), which the tests of how each
// store writes and reads its state (tasks.json on the file store, a
// snapshot on NATS) start from, and the check that a faster JSON decoder
// reads what encoding/json reads (SameAsStdlib).
package statetest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// Full returns a state of run r1 at seq 9 with every field of State,
// Task, Worker and Open set somewhere: a waiting task t1 with a worker
// and its open question q1, a pending task t2 with a broadcast's copy b1
// open, and two mailbox files. A field added to them belongs here too.
func Full() *state.State {
	at := events.Now()
	st := state.New()
	st.Run, st.Seq, st.Offset, st.Leader = "r1", 9, 812, "lead"
	st.Files = map[string]int64{"inbox": 7, "outbox": 8}
	st.Tasks["t1"] = &state.Task{ID: "t1", Title: "é \"q\" <b>", Agent: "a1", Status: task.Waiting, CreatedAt: at, UpdatedAt: at, StartedAt: &at,
		Question: "q1", QuestionFrom: "t1", QuestionAt: &at, ClosedSeq: 3, Questions: 2, Attempts: 1, LastEventAt: at, LastSeenAt: &at, NudgedAt: &at,
		Workers: []state.Worker{{Attempt: 1, PID: 42, Start: 7, Host: "h", Boot: "b", Command: []string{"sh", "-c", "x"}, Supervisor: 41, Log: "l", Tmux: "s:1"}}, CreatedSeq: 2}
	st.Tasks["t2"] = &state.Task{ID: "t2", Status: task.Pending, CreatedAt: at, UpdatedAt: at, LastEventAt: at, CreatedSeq: 4}
	st.Open["q1"] = &state.Open{ID: "q1", Seq: 8, Task: "t1", Kind: events.KindQuestion, File: "outbox", Priority: "normal", Status: events.StatusDelivered, DeliveredAt: &at, DeliveredVia: "hook", From: "t1", SentAt: at}
	st.Open[state.Key("b1", events.Broadcast, "t2")] = &state.Open{ID: "b1", Seq: 5, Task: "t2", Kind: events.KindSteer, File: "steering", Priority: "high", Status: events.StatusPending, From: "lead", SentAt: at}
	return st
}

// SameAsStdlib checks that decode reads text (a case called name) as
// encoding/json.Unmarshal reads it into a T: both fail, or both give
// the same value.
func SameAsStdlib[T any](t *testing.T, name, text string, decode func([]byte, *T) error) {
	t.Helper()
	var got, want T
	gotErr, wantErr := decode([]byte(text), &got), json.Unmarshal([]byte(text), &want)
	switch {
	case (gotErr != nil) != (wantErr != nil):
		t.Errorf("%s: the decoder says %v, encoding/json %v", name, gotErr, wantErr)
	case gotErr == nil && !reflect.DeepEqual(got, want):
		t.Errorf("%s: the decoder reads\n%+v\nencoding/json\n%+v", name, got, want)
	}
}

// Variants returns doc, the JSON of a value holding Full's state
// (tasks.json, a NATS snapshot), and variants of it that a decoder must
// read as encoding/json does (SameAsStdlib): keys in other letter cases,
// unknown and repeated keys, escapes, null tasks, a seq and a time of
// the wrong shape, bytes after the value, and the value cut short.
func Variants(doc string) map[string]string {
	return map[string]string{
		"crew's":           doc,
		"keys in capitals": strings.Replace(strings.Replace(doc, `"seq":`, `"SEQ":`, 3), `"title":`, `"Title":`, 1),
		"unknown keys":     strings.Replace(doc, `{`, `{"extra":{"a":[1,2,null]},`, 1),
		"a repeated key":   strings.Replace(doc, `"leader":"lead"`, `"leader":"x","leader":"lead"`, 1),
		"escapes":          strings.Replace(doc, `"leader":"lead"`, `"leader":"l\u0065ad\n"`, 1),
		"null tasks":       strings.Replace(doc, `"tasks":{`, `"tasks":null,"x":{`, 1),
		"a string seq":     strings.Replace(doc, `"seq":9`, `"seq":"9"`, 1),
		"a bad time":       strings.Replace(doc, `"updatedAt":"`, `"updatedAt":"x`, 1),
		"trailing bytes":   doc + "{}",
		"cut short":        doc[:len(doc)/2],
	}
}
