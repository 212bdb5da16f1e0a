package mailbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
)

func TestName(t *testing.T) {
	m := Mail{From: "leader", ID: "0193a1c2-0000-7000-8000-000000000001", Timestamp: testTime}
	if got, want := Name(m), "2026-03-05T10-30-00.123Z-leader-0193a1c2-0000-7000-8000-000000000001.json"; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
	// Whole seconds keep their milliseconds; other zones become UTC.
	m.Timestamp = time.Date(2026, 3, 5, 11, 30, 0, 0, time.FixedZone("CET", 3600))
	if got, want := Name(m), "2026-03-05T10-30-00.000Z-leader-0193a1c2-0000-7000-8000-000000000001.json"; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}

	// Names sort in time order, within a second and across fields.
	base := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)
	var times []time.Time
	for _, d := range []time.Duration{0, time.Millisecond, 9 * time.Millisecond, 10 * time.Millisecond, 999 * time.Millisecond, time.Second, time.Minute, time.Hour, 24 * time.Hour, 40 * 24 * time.Hour, 400 * 24 * time.Hour} {
		times = append(times, base.Add(d))
	}
	var names []string
	for i := len(times) - 1; i >= 0; i-- {
		// The same sender and id, so only the stamp orders them.
		names = append(names, Name(Mail{From: "a", ID: "x", Timestamp: times[i]}))
	}
	sort.Strings(names)
	for i, n := range names {
		if want := Name(Mail{From: "a", ID: "x", Timestamp: times[i]}); n != want {
			t.Errorf("sorted names[%d] = %s, want %s", i, n, want)
		}
	}
}

func TestMarshal(t *testing.T) {
	m := testMail(t, testTime)
	m.Extra = map[string]json.RawMessage{"thread": json.RawMessage(`{"b":1,"a":[true,null]}`), "aaa": json.RawMessage(`"first"`)}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte("}\n")) || bytes.Count(data, []byte("\n")) != 1 {
		t.Errorf("Marshal = %q, want one compact line ending in a newline", data)
	}
	keys := topKeys(t, data)
	if !slices.IsSorted(keys) {
		t.Errorf("keys in file order %v, want sorted", keys)
	}
	want := []string{"aaa", "body", "from", "id", "kind", "priority", "read", "run", "subject", "task", "thread", "timestamp", "to", "type"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys = %v, want %v", keys, want)
	}
	for _, s := range []string{`"timestamp":"2026-03-05T10:30:00.123Z"`, `"body":"Use Postgres.\n<b>&</b>"`, `"read":false`} {
		if !bytes.Contains(data, []byte(s)) {
			t.Errorf("Marshal = %s, want it to contain %s", data, s)
		}
	}
	got, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !sameMail(got, m) {
		t.Errorf("Parse(Marshal(m)) = %+v, want %+v", got, m)
	}

	// Without extra keys (every copy crew writes) the same bytes, less
	// the extra keys' own.
	m.Extra = nil
	plain, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	wantPlain := bytes.Replace(bytes.Replace(data, []byte(`"aaa":"first",`), nil, 1), []byte(`"thread":{"b":1,"a":[true,null]},`), nil, 1)
	if !bytes.Equal(plain, wantPlain) {
		t.Errorf("Marshal without extra keys = %s, want %s", plain, wantPlain)
	}

	// A mail of another tool has no run keys, and gets none.
	m = Mail{From: "mayor", To: "bob", Type: "coordination", Timestamp: testTime, Priority: "low"}
	data, err = m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if keys, want := topKeys(t, data), []string{"body", "from", "priority", "read", "subject", "timestamp", "to", "type"}; !slices.Equal(keys, want) {
		t.Errorf("keys = %v, want %v", keys, want)
	}

	for name, bad := range map[string]Mail{
		"invalid UTF-8": {Body: "a\xffb", Timestamp: testTime},
		"extra key":     {Timestamp: testTime, Extra: map[string]json.RawMessage{"read": json.RawMessage("true")}},
		"extra value":   {Timestamp: testTime, Extra: map[string]json.RawMessage{"x": json.RawMessage("{")}},
		"year 10000":    {Timestamp: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if _, err := bad.Marshal(); !errors.Is(err, crew.ErrInvalid) {
			t.Errorf("%s: Marshal error = %v, want ErrInvalid", name, err)
		}
	}
}

func TestParse(t *testing.T) {
	pretty := []byte("{\n  \"body\": \"hi\",\n  \"from\": \"mayor-a1b2c\",\n  \"priority\": \"normal\",\n  \"read\": false,\n  \"timestamp\": \"2026-03-05T11:30:00.5+01:00\",\n  \"to\": \"x\",\n  \"type\": \"work_assignment\",\n  \"labels\": [ \"a\",\n \"b\" ]\n}\n")
	m, err := Parse(pretty)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 3, 5, 10, 30, 0, 500_000_000, time.UTC); !m.Timestamp.Equal(want) || m.Timestamp.Location() != time.UTC {
		t.Errorf("Timestamp = %v, want %v", m.Timestamp, want)
	}
	if m.ID != "" || m.From != "mayor-a1b2c" || m.Type != "work_assignment" {
		t.Errorf("Parse = %+v", m)
	}
	if got := string(m.Extra["labels"]); got != `["a","b"]` {
		t.Errorf(`Extra["labels"] = %s, want ["a","b"] (compacted)`, got)
	}
	// Sub-millisecond digits are cut, so that a rewrite gives the same Mail.
	if m, err := Parse([]byte(`{"timestamp":"2026-03-05T10:30:00.123456789Z"}`)); err != nil || m.Timestamp.Nanosecond() != 123_000_000 {
		t.Errorf("Parse nanoseconds = %v, %v", m.Timestamp, err)
	}
	for _, bad := range []string{``, `null`, `[]`, `"x"`, `{"body":"half a mess`, `{"read":"yes"}`, `{"from":1}`, `{"timestamp":"yesterday"}`, `{"timestamp":"9999-12-31T23:59:59-01:00"}`, `{} {}`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", bad)
		}
	}
}

func TestMailJSON(t *testing.T) {
	m := testMail(t, testTime)
	data, err := json.Marshal(struct{ Mail Mail }{m})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"timestamp":"2026-03-05T10:30:00.123Z"`)) {
		t.Errorf("json.Marshal = %s", data)
	}
	var back struct{ Mail Mail }
	if err := json.Unmarshal(data, &back); err != nil || !sameMail(back.Mail, m) {
		t.Errorf("json.Unmarshal = %+v, %v", back.Mail, err)
	}
}

// TestFile: the file every Store writes for a message is Name and
// Marshal of it, with the default priority filled in; what Deliver
// refuses, File refuses.
func TestFile(t *testing.T) {
	m := testMail(t, testTime)
	m.Priority = ""
	name, data, err := File(m)
	if err != nil {
		t.Fatal(err)
	}
	m.Priority = events.DefaultPriority
	if want, _ := m.Marshal(); name != Name(m) || !bytes.Equal(data, want) {
		t.Errorf("File = %s, %s; want %s, %s", name, data, Name(m), want)
	}
	m.Priority = "soon"
	if _, _, err := File(m); !errors.Is(err, crew.ErrInvalid) || Check(m) == nil {
		t.Errorf("File with priority soon: %v, want ErrInvalid", err)
	}
}

// TestRulesOfNames: how a message is found by id and ordered, and what
// Archive moves, as every Store reads them.
func TestRulesOfNames(t *testing.T) {
	m := testMail(t, testTime)
	name := Name(m)
	for id, want := range map[string]bool{m.ID: true, name: true, strings.TrimSuffix(name, ".json"): true, "x" + m.ID: false, "": false} {
		if got := NameHasID(name, id); got != want {
			t.Errorf("NameHasID(%s, %q) = %v, want %v", name, id, got, want)
		}
	}
	for id, want := range map[string]bool{name: true, m.ID: false, ".tmp-x.json": false, "a/b.json": false} {
		if got := IsFileName(id); got != want {
			t.Errorf("IsFileName(%q) = %v, want %v", id, got, want)
		}
	}
	data, _ := m.Marshal()
	if !HoldsMessage(data, m.ID) || HoldsMessage(data, "other") || HoldsMessage([]byte("{"), m.ID) {
		t.Error("HoldsMessage does not tell the message by its id")
	}
	later := m
	later.Timestamp = m.Timestamp.Add(time.Millisecond)
	entries := []Entry{{Name: "b", Mail: later}, {Name: "z", Mail: m}, {Name: "a", Mail: later}}
	SortEntries(entries)
	if entries[0].Name != "z" || entries[1].Name != "a" || entries[2].Name != "b" {
		t.Errorf("SortEntries: %s %s %s, want z a b", entries[0].Name, entries[1].Name, entries[2].Name)
	}
	cutoff := m.Timestamp.Add(time.Second)
	read := m
	read.Read = true
	if !read.Archivable(cutoff, false) || m.Archivable(cutoff, false) || !m.Archivable(cutoff, true) || read.Archivable(m.Timestamp, true) {
		t.Error("Archivable: want read mail older than the cutoff, unread only when asked")
	}
}
