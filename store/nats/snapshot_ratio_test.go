package nats

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	sjson "github.com/segmentio/encoding/json"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/task"
)

// TestSnapshotRatio: a snapshot's value that grows more than
// snapshotRatio when decompressed is refused (the state is then rebuilt
// from the log), a crew snapshot is read. The breaker's bomb was a
// value of 204 KB that grew to 200 MB: every crew process spent 1.9 s
// and 417 MB on it.
func TestSnapshotRatio(t *testing.T) {
	st := state.New()
	st.Run, st.Seq = "r1", 1
	value, err := encodeSnapshot(st, "sum")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeSnapshot(value); err != nil {
		t.Fatalf("crew's snapshot: %v", err)
	}
	doc := gunzip(t, value)
	// The same document after 8 MiB of spaces: the same JSON, grown a
	// thousand times.
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(bytes.Repeat([]byte(" "), 8<<20))
	zw.Write(doc)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeSnapshot(buf.Bytes()); err == nil {
		t.Fatalf("a value of %d bytes that grows to %d was read", buf.Len(), 8<<20+len(doc))
	}
}

// TestDecodeSnapshotAsStdlib: segmentio's decoder, which decodeSnapshot uses,
// reads what encoding/json reads, or refuses it too: crew's own value
// with every field set, and the same value with keys in other letter
// cases, unknown and repeated keys, escapes, nulls and trailing bytes.
func TestDecodeSnapshotAsStdlib(t *testing.T) {
	at := events.Now()
	st := state.New()
	st.Run, st.Seq, st.Leader = "r1", 9, "lead"
	st.Files = map[string]int64{"inbox": 7, "outbox": 8}
	st.Tasks["t1"] = &state.Task{ID: "t1", Title: "é \"q\" <b>", Agent: "a1", Status: task.Waiting, CreatedAt: at, UpdatedAt: at, StartedAt: &at,
		Question: "q1", QuestionFrom: "t1", QuestionAt: &at, ClosedSeq: 3, Questions: 2, Attempts: 1, LastEventAt: at, LastSeenAt: &at, NudgedAt: &at,
		Workers: []state.Worker{{Attempt: 1, PID: 42, Start: 7, Host: "h", Boot: "b", Command: []string{"sh", "-c", "x"}, Supervisor: 41, Log: "l", Tmux: "s:1"}}, CreatedSeq: 2}
	st.Tasks["t2"] = &state.Task{ID: "t2", Status: task.Pending, CreatedAt: at, UpdatedAt: at, LastEventAt: at, CreatedSeq: 4}
	st.Open["q1"] = &state.Open{ID: "q1", Seq: 8, Task: "t1", Kind: events.KindQuestion, File: "outbox", Priority: "normal", Status: events.StatusDelivered, DeliveredAt: &at, DeliveredVia: "hook", From: "t1", SentAt: at}
	st.Open[state.Key("b1", events.Broadcast, "t2")] = &state.Open{ID: "b1", Seq: 5, Task: "t2", Kind: events.KindSteer, File: "steering", Priority: "high", Status: events.StatusPending, From: "lead", SentAt: at}
	value, err := encodeSnapshot(st, "sum")
	if err != nil {
		t.Fatal(err)
	}
	doc := gunzip(t, value)
	if _, err := decodeSnapshot(value); err != nil {
		t.Fatalf("crew's snapshot: %v", err)
	}
	plain := string(doc)
	for name, text := range map[string]string{
		"crew's":           plain,
		"keys in capitals": strings.Replace(strings.Replace(plain, `"seq":`, `"SEQ":`, 3), `"title":`, `"Title":`, 1),
		"unknown keys":     strings.Replace(plain, `"v":1,`, `"v":1,"extra":{"a":[1,2,null]},`, 1),
		"a repeated key":   strings.Replace(plain, `"v":1,`, `"v":1,"run":"r2",`, 1),
		"escapes":          strings.Replace(plain, `"leader":"lead"`, `"leader":"l\u0065ad\n"`, 1),
		"null tasks":       strings.Replace(plain, `"tasks":{`, `"tasks":null,"x":{`, 1),
		"a string seq":     strings.Replace(plain, `"seq":9`, `"seq":"9"`, 1),
		"a bad time":       strings.Replace(plain, `"sentAt":"`, `"sentAt":"x`, 1),
		"trailing bytes":   plain + "{}",
		"cut short":        plain[:len(plain)/2],
	} {
		var got, want snapshotDoc
		gotErr, wantErr := sjson.Unmarshal([]byte(text), &got), json.Unmarshal([]byte(text), &want)
		switch {
		case (gotErr != nil) != (wantErr != nil):
			t.Errorf("%s: segmentio says %v, encoding/json %v", name, gotErr, wantErr)
		case gotErr == nil && !reflect.DeepEqual(got, want):
			t.Errorf("%s: segmentio decodes\n%+v\nencoding/json\n%+v", name, got, want)
		}
	}
}

// gunzip returns the decompressed bytes of a snapshot's value.
func gunzip(t *testing.T, value []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(value))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
