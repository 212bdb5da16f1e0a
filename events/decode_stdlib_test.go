package events

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// stdlibDecodeMessage is DecodeMessage with encoding/json: what
// DecodeMessage must keep giving.
func stdlibDecodeMessage(line []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		return Message{}, err
	}
	if m.ID == "" || m.Seq <= 0 || m.Kind == "" {
		return Message{}, os.ErrInvalid
	}
	return m, nil
}

// stdlibDecode is Decode with encoding/json.
func stdlibDecode(line []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(line, &e); err != nil {
		return Event{}, err
	}
	if e.Seq <= 0 || e.Type == "" {
		return Event{}, os.ErrInvalid
	}
	return e, nil
}

// sameAs fails t unless ours and encoding/json's decoder (std) agree on
// line: both refuse it, or both give the same value.
func sameAs[T any](t *testing.T, line []byte, ours, std func([]byte) (T, error)) {
	t.Helper()
	v, err := ours(line)
	want, werr := std(line)
	if (err == nil) != (werr == nil) {
		t.Fatalf("line %q: error %v, encoding/json error %v", line, err, werr)
	}
	if err == nil && !reflect.DeepEqual(v, want) {
		t.Fatalf("line %q: decoded\n%#v\nencoding/json\n%#v", line, v, want)
	}
}

// sameAsStdlib checks DecodeMessage on line.
func sameAsStdlib(t *testing.T, line []byte) {
	t.Helper()
	sameAs(t, line, DecodeMessage, stdlibDecodeMessage)
}

// sameEventAsStdlib checks Decode on line, on the event that carries
// line as its message, and on line as an event of its own.
func sameEventAsStdlib(t *testing.T, line []byte) {
	t.Helper()
	sameAs(t, line, Decode, stdlibDecode)
	sameAs(t, []byte(`{"seq":3,"at":"2026-11-29T21:04:05.123Z","type":"message.sent","run":"r","message":`+string(line)+`}`), Decode, stdlibDecode)
	sameAs(t, bytes.Replace(line, []byte(`"kind":`), []byte(`"type":`), 1), Decode, stdlibDecode)
}

// decodeCases are mailbox lines, valid and not, where two JSON decoders
// may part: escapes, invalid UTF-8, surrogates, duplicate keys, keys in
// another letter case, nulls, numbers, raw data, trailing bytes.
var decodeCases = []string{
	`{"id":"a","seq":1,"kind":"steer","body":"plain"}`,
	`{"id":"a","seq":1,"kind":"steer","body":"esc \" \\ \/ \b \f \n \r \t \u00e9 \u2028 \ud83d\ude00 <&>"}`,
	`{"id":"a","seq":1,"kind":"steer","body":"lone \ud800 surrogate \udc00 x"}`,
	`{"id":"a","seq":1,"kind":"steer","body":"bad \ud800\u0041"}`,
	"{\"id\":\"a\",\"seq\":1,\"kind\":\"steer\",\"body\":\"invalid \xff\xfe utf8 \xc3\"}",
	"{\"id\":\"a\",\"seq\":1,\"kind\":\"steer\",\"body\":\"ctl \x01\"}",
	`{"id":"a","seq":1,"kind":"steer","body":"x","body":"y"}`,
	`{"ID":"a","SEQ":1,"Kind":"steer","BODY":"case"}`,
	`{"id":"a","seq":1,"kind":"steer","body":null,"deliveredAt":null,"data":null}`,
	`{"id":"a","seq":1.0,"kind":"steer"}`,
	`{"id":"a","seq":1e2,"kind":"steer"}`,
	`{"id":"a","seq":-1,"kind":"steer"}`,
	`{"id":"a","seq":9223372036854775808,"kind":"steer"}`,
	`{"id":"a","seq":"1","kind":"steer"}`,
	`{"id":"a","seq":01,"kind":"steer"}`,
	`{"id":1,"seq":1,"kind":"steer"}`,
	`{"id":"a","seq":1,"kind":"steer","data":{"b": [1, 2.5e3, "x", null, true]}}`,
	`{"id":"a","seq":1,"kind":"steer","data": "s" }`,
	`{"id":"a","seq":1,"kind":"steer","sentAt":"2026-11-29T21:04:05.123Z","deliveredAt":"2026-11-29T21:04:06.000Z"}`,
	`{"id":"a","seq":1,"kind":"steer","sentAt":"yesterday"}`,
	`{"id":"a","seq":1,"kind":"steer","sentAt":12}`,
	`{"id":"a","seq":1,"kind":"steer","unknown":{"deep":[{}]}}`,
	`{"id":"a","seq":1,"kind":"steer"} `,
	`{"id":"a","seq":1,"kind":"steer"}x`,
	`{"id":"a","seq":1,"kind":"steer"}{}`,
	`{"id":"a","seq":1,"kind":"steer",}`,
	`{"id":"a","seq":1,"kind":"steer"`,
	`{"id":"a" "seq":1}`,
	`[{"id":"a","seq":1,"kind":"steer"}]`,
	`null`,
	``,
	` {"id" : "a" , "seq" : 1 , "kind" : "steer" } `,
	`{"id":"a","seq":1,"kind":"steer","body":"\u0000"}`,
	`{"id":"a","seq":1,"kind":"steer","body":"\x"}`,
	`{"id":"a","seq":1,"kind":"steer","body":"\u12"}`,
	`{"id":"a","seq":1,"kind":"steer","priority":true}`,
	`{"id":"a","seq":1,"kind":"steer","data":tru}`,
}

// TestDecodeMessageAsStdlib checks that DecodeMessage decodes what
// encoding/json decodes, into the same message, and refuses what it
// refuses: the cases above, the fuzz seeds, and a line of each kind as
// Marshal writes it.
func TestDecodeMessageAsStdlib(t *testing.T) {
	for _, c := range decodeCases {
		sameAsStdlib(t, []byte(c))
	}
	for _, seed := range fuzzSeeds(t, "FuzzDecodeMessage") {
		sameAsStdlib(t, seed)
	}
	for i, k := range []string{KindSteer, KindFollowUp, KindNudge, KindQuestion, KindReport} {
		at := Now()
		m := Message{ID: "01a24302-df25-7be5-8548-cfb8161da47d", Seq: int64(i + 1), Run: "r", Task: "t1", Kind: k, From: "leader", To: "t1",
			Body: "line one\nline \"two\" \u00e9 \U0001F600 <tag> & \t end", Priority: "normal", Status: StatusPending, SentAt: at, DeliveredAt: &at,
			Data: json.RawMessage(`{"answer":"yes","n":[1,2]}`)}
		line, err := Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		sameAsStdlib(t, line)
	}
}

// FuzzDecodeMessageAsStdlib is TestDecodeMessageAsStdlib's check on any
// line. Run with go test -fuzz FuzzDecodeMessageAsStdlib ./events/.
func FuzzDecodeMessageAsStdlib(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, line []byte) { sameAsStdlib(t, line) })
}

// TestDecodeAsStdlib checks that Decode decodes what encoding/json
// decodes, into the same event, and refuses what it refuses: the mailbox
// cases above as events, the seeds of FuzzDecodeEvent, and an event of
// each kind of message as Marshal writes it.
func TestDecodeAsStdlib(t *testing.T) {
	for _, c := range decodeCases {
		sameEventAsStdlib(t, []byte(c))
	}
	for _, seed := range fuzzSeeds(t, "FuzzDecodeEvent") {
		sameEventAsStdlib(t, seed)
	}
	for i, k := range []string{KindSteer, KindFollowUp, KindNudge, KindQuestion, KindReport} {
		at := Now()
		e := Event{Seq: int64(i + 1), At: at, Type: "message.sent", Run: "r", Task: "t1", Actor: "leader", From: "running", To: "waiting", Reason: "why <&>",
			Message:    &Message{ID: "01a24302-df25-7be5-8548-cfb8161da47d", Seq: int64(i + 1), Kind: k, From: "leader", To: "t1", Body: "b \u00e9 \U0001F600", SentAt: at, DeliveredAt: &at},
			MessageIDs: []string{"a", "b"}, Via: ViaHook + ":stop", Data: json.RawMessage(`{"n":[1,2.5,null]}`)}
		line, err := Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		sameEventAsStdlib(t, line)
	}
}

// FuzzDecodeAsStdlib is TestDecodeAsStdlib's check on any line. Run
// with go test -fuzz FuzzDecodeAsStdlib ./events/.
func FuzzDecodeAsStdlib(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, line []byte) { sameEventAsStdlib(t, line) })
}

// fuzzSeeds returns the inputs of fuzz target name's seed files in
// testdata/fuzz: each is "go test fuzz v1", then []byte("...").
func fuzzSeeds(t *testing.T, name string) [][]byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", name, "*"))
	if len(files) == 0 {
		t.Fatalf("no seeds of %s", name)
	}
	var seeds [][]byte
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			if q, ok := strings.CutPrefix(l, "[]byte("); ok {
				s, err := strconv.Unquote(strings.TrimSuffix(q, ")"))
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				seeds = append(seeds, []byte(s))
			}
		}
	}
	return seeds
}
