package events

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// compactRaw returns raw compacted, as Marshal writes a json.RawMessage.
func compactRaw(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	if raw == nil {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("decoded data %q is not JSON: %v", raw, err)
	}
	return b.Bytes()
}

// checkLine checks what every line Marshal writes must be: one line of
// JSON, ending in its only '\n'.
func checkLine(t *testing.T, line []byte) {
	t.Helper()
	if len(line) == 0 || line[len(line)-1] != '\n' || bytes.IndexByte(line, '\n') != len(line)-1 {
		t.Fatalf("Marshal wrote %q: not one line ending in '\\n'", line)
	}
	if !json.Valid(line) {
		t.Fatalf("Marshal wrote invalid JSON %q", line)
	}
}

// FuzzDecodeEvent checks that Decode never panics, and that an event it
// accepts is written by Marshal as one line that decodes to the same event
// (its data compacted), and that Marshal is then stable byte for byte.
// Seeds are in testdata/fuzz/FuzzDecodeEvent. Run with
// go test -fuzz FuzzDecodeEvent ./events/.
func FuzzDecodeEvent(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data)
		if err != nil {
			return
		}
		if e.Seq <= 0 || e.Type == "" {
			t.Fatalf("Decode accepted an event without seq or type: %+v", e)
		}
		line, err := Marshal(&e)
		if err != nil {
			t.Fatalf("Decode accepted %q but Marshal fails: %v", data, err)
		}
		checkLine(t, line)
		e2, err := Decode(line)
		if err != nil {
			t.Fatalf("Decode(Marshal(e)) fails: %v\nline: %s", err, line)
		}
		e.Data = compactRaw(t, e.Data)
		if len(e.MessageIDs) == 0 {
			e.MessageIDs = nil // [] and no key mean the same (omitempty)
		}
		if e.Message != nil {
			m := *e.Message
			m.Data = compactRaw(t, m.Data)
			e.Message = &m
		}
		if !reflect.DeepEqual(e, e2) {
			t.Fatalf("Decode(Marshal(e)) = %+v\nwant %+v\nline: %s", e2, e, line)
		}
		line2, err := Marshal(&e2)
		if err != nil || !bytes.Equal(line, line2) {
			t.Fatalf("Marshal not stable: %s then %s (%v)", line, line2, err)
		}
	})
}

// FuzzDecodeMessage is FuzzDecodeEvent for mailbox lines (DecodeMessage).
// Seeds are in testdata/fuzz/FuzzDecodeMessage. Run with
// go test -fuzz FuzzDecodeMessage ./events/.
func FuzzDecodeMessage(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeMessage(data)
		if err != nil {
			return
		}
		if m.ID == "" || m.Seq <= 0 || m.Kind == "" {
			t.Fatalf("DecodeMessage accepted a message without id, seq or kind: %+v", m)
		}
		line, err := Marshal(&m)
		if err != nil {
			t.Fatalf("DecodeMessage accepted %q but Marshal fails: %v", data, err)
		}
		checkLine(t, line)
		m2, err := DecodeMessage(line)
		if err != nil {
			t.Fatalf("DecodeMessage(Marshal(m)) fails: %v\nline: %s", err, line)
		}
		m.Data = compactRaw(t, m.Data)
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("DecodeMessage(Marshal(m)) = %+v\nwant %+v\nline: %s", m2, m, line)
		}
		line2, err := Marshal(&m2)
		if err != nil || !bytes.Equal(line, line2) {
			t.Fatalf("Marshal not stable: %s then %s (%v)", line, line2, err)
		}
	})
}
