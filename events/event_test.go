package events

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

var stampRE = regexp.MustCompile(`^"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"$`)

func TestTimeMarshalsMillisecondsZ(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	cases := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 11, 29, 21, 4, 5, 123e6, time.UTC), `"2026-11-29T21:04:05.123Z"`},
		{time.Date(2026, 11, 29, 21, 4, 5, 0, time.UTC), `"2026-11-29T21:04:05.000Z"`},         // zeros kept
		{time.Date(2026, 11, 29, 21, 4, 5, 100e6, time.UTC), `"2026-11-29T21:04:05.100Z"`},     // trailing zeros kept
		{time.Date(2026, 11, 29, 21, 4, 5, 123999999, time.UTC), `"2026-11-29T21:04:05.123Z"`}, // cut, not rounded
		{time.Date(2026, 11, 29, 22, 4, 5, 7e6, cet), `"2026-11-29T21:04:05.007Z"`},            // in UTC
	}
	for _, c := range cases {
		b, err := json.Marshal(Time{c.in})
		if err != nil || string(b) != c.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", c.in, b, err, c.want)
		}
		if !stampRE.Match(b) {
			t.Errorf("Marshal(%v) = %s: not 3 fractional digits and Z", c.in, b)
		}
	}
	now := Now()
	b, _ := json.Marshal(now)
	if !stampRE.Match(b) || now.Nanosecond()%1e6 != 0 || now.Location() != time.UTC {
		t.Errorf("Now() = %s (%v): not a UTC millisecond", b, now.Location())
	}
	if got := (Time{cases[0].in}).String(); got != "2026-11-29T21:04:05.123Z" {
		t.Errorf("String() = %s", got)
	}
}

func TestTimeUnmarshal(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		{`"2026-11-29T21:04:05.123Z"`, "2026-11-29T21:04:05.123Z"},
		{`"2026-11-29T21:04:05Z"`, "2026-11-29T21:04:05.000Z"},
		{`"2026-11-29T23:04:05.5+02:00"`, "2026-11-29T21:04:05.500Z"},
		// Sub-millisecond digits are cut on the way in, so a decoded time
		// marshals back to the instant it holds.
		{`"2026-11-29T21:04:05.123999Z"`, "2026-11-29T21:04:05.123Z"},
		// Escapes are JSON's to undo (crew writes none in a time).
		{`"2026-11-29T21:04:05.123\u005a"`, "2026-11-29T21:04:05.123Z"},
	}
	for _, c := range cases {
		var tm Time
		if err := json.Unmarshal([]byte(c.in), &tm); err != nil {
			t.Errorf("Unmarshal(%s): %v", c.in, err)
			continue
		}
		if tm.String() != c.want || tm.Nanosecond()%1e6 != 0 {
			t.Errorf("Unmarshal(%s) = %s (%d ns); want %s", c.in, tm, tm.Nanosecond(), c.want)
		}
		b, _ := json.Marshal(tm)
		var back Time
		if err := json.Unmarshal(b, &back); err != nil || !back.Equal(tm.Time) {
			t.Errorf("round trip of %s: %s, %v", c.in, b, err)
		}
	}
	// Times that have no 4-digit year in UTC cannot be written back as
	// RFC 3339: refused, not turned into a line no reader can parse.
	for _, in := range []string{`"0000-01-01T00:30:00+01:00"`, `"9999-12-31T23:59:59-01:00"`, `"yesterday"`, `""`, `null`, `12`, `"2026-11-29 21:04:05Z"`} {
		var tm Time
		if err := json.Unmarshal([]byte(in), &tm); err == nil {
			t.Errorf("Unmarshal(%s) = %s, want an error", in, tm)
		}
	}
}

func TestMarshalDoesNotEscapeHTML(t *testing.T) {
	m := Message{ID: "a", Seq: 1, Kind: KindSteer, Body: "if a < b && c > d { <script> }\nline 2\u2028", SentAt: Time{time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)}}
	line, err := Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	s := string(line)
	if !strings.Contains(s, `"body":"if a < b && c > d { <script> }\nline 2`) {
		t.Errorf("Marshal escaped HTML or mangled the body: %s", s)
	}
	if strings.Contains(s, `\u003c`) || strings.Contains(s, `\u0026`) {
		t.Errorf("Marshal escaped HTML: %s", s)
	}
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Errorf("Marshal wrote %q: want one line ending in \\n", s)
	}
	back, err := DecodeMessage(line)
	if err != nil || back.Body != m.Body {
		t.Errorf("body does not round-trip: %q, %v", back.Body, err)
	}
}

func TestMarshalEventFieldNames(t *testing.T) {
	e := Event{Seq: 13, At: Time{time.Date(2026, 11, 29, 21, 4, 5, 123e6, time.UTC)}, Type: TaskResponded, Run: "r1", Task: "t1",
		Actor: "leader", From: "waiting", To: "running", Message: &Message{ID: "m", Seq: 13, Kind: KindResponse, ReplyTo: "q"}}
	line, err := Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"seq":13,"at":"2026-11-29T21:04:05.123Z","type":"task.responded","run":"r1","task":"t1","actor":"leader","from":"waiting","to":"running","message":{"id":"m","seq":13,"run":"","task":"","kind":"response","direction":"","from":"","to":"","body":"","priority":"","status":"","sentAt":"0001-01-01T00:00:00.000Z","replyTo":"q"}}` + "\n"
	if string(line) != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", line, want)
	}
}

func TestDecode(t *testing.T) {
	good := `{"seq":3,"at":"2026-11-29T21:04:05.123Z","type":"task.started","run":"r1","task":"t1","from":"pending","to":"running"}`
	e, err := Decode([]byte(good))
	if err != nil || e.Seq != 3 || e.Type != TaskStarted || e.Task != "t1" || e.To != "running" {
		t.Fatalf("Decode = %+v, %v", e, err)
	}
	for _, bad := range []string{``, `{`, `[]`, `null`, `{"type":"x"}`, `{"seq":0,"type":"x"}`, `{"seq":-1,"type":"x"}`, `{"seq":2}`, `{"seq":"2","type":"x"}`, `{"seq":2,"type":"x","at":"never"}`} {
		if e, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s) = %+v, want an error", bad, e)
		}
	}
}

func TestDecodeMessage(t *testing.T) {
	good := `{"id":"0193a1c2-7b1e-7c3d-9e2f-0a1b2c3d4e5f","seq":12,"run":"r1","task":"t1","kind":"response","direction":"inbox","from":"leader","to":"t1","body":"Use Postgres.","priority":"normal","status":"pending","sentAt":"2026-11-29T21:04:05.123Z","replyTo":"0193a1b0-7b1e-7c3d-9e2f-0a1b2c3d4e5f","data":{}}`
	m, err := DecodeMessage([]byte(good))
	if err != nil || m.Seq != 12 || m.Body != "Use Postgres." || m.File() != "inbox" {
		t.Fatalf("DecodeMessage = %+v, %v", m, err)
	}
	line, _ := Marshal(&m)
	if string(line) != good+"\n" {
		t.Errorf("Marshal(DecodeMessage(line)) =\n%s\nwant\n%s", line, good)
	}
	for _, bad := range []string{``, `{"seq":1,"kind":"steer"}`, `{"id":"a","kind":"steer"}`, `{"id":"a","seq":1}`, `{"id":"a","seq":1,"kind":"steer","sentAt":3}`} {
		if m, err := DecodeMessage([]byte(bad)); err == nil {
			t.Errorf("DecodeMessage(%s) = %+v, want an error", bad, m)
		}
	}
}

func TestMessageFile(t *testing.T) {
	cases := map[string]Message{
		"steering": {Kind: KindSteer, Direction: Inbox},
		"inbox":    {Kind: KindResponse, Direction: Inbox},
		"outbox":   {Kind: KindQuestion, Direction: Outbox},
	}
	for want, m := range cases {
		if got := m.File(); got != want {
			t.Errorf("%s.File() = %s, want %s", m.Kind, got, want)
		}
	}
}

func TestPriorityRank(t *testing.T) {
	for i, p := range []string{"low", "normal", "high", "urgent"} {
		if PriorityRank(p) != i {
			t.Errorf("PriorityRank(%s) = %d, want %d", p, PriorityRank(p), i)
		}
	}
	if PriorityRank("URGENT") != -1 || PriorityRank("") != -1 {
		t.Error("unknown priorities must rank -1")
	}
}
