// The mail file format (docs/mail-tree.md, Fields): Mail and its JSON
// (Parse, ParseMessage, Marshal), what a delivery needs of a message
// (Check), and the edit of its read flag (WithRead). Nothing here touches
// the disk.

package mailbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
)

// Types are the mail types of docs/mail-tree.md, in the mail-async vocabulary. Deliver
// refuses any other type; Parse accepts any string, so that mail written by
// other tools with newer types is still read.
var Types = []string{
	"work_assignment",
	"completion_report",
	"merge_notification",
	"health_escalation",
	"coordination",
}

// mailKeys are the JSON keys that map to fields of Mail; every other key of
// a mail file goes to Mail.Extra.
var mailKeys = []string{"body", "from", "id", "kind", "priority", "read", "run", "subject", "task", "timestamp", "to", "type"}

// Layouts of a mail timestamp: in the file (RFC 3339, UTC, milliseconds)
// and in the file name (the same with colons replaced by dashes, because
// colons are not allowed in Windows file names).
const (
	timeLayout  = "2006-01-02T15:04:05.000Z"
	stampLayout = "2006-01-02T15-04-05.000Z"
)

// Mail is one message of the per-agent mail tree (docs/mail-tree.md): the content of
// one file <root>/<agent>/<stamp>-<from>-<id>.json. Its JSON form (Marshal)
// is one compact object with sorted keys and a trailing newline, as
// mail-async tools write it, so a file can be read by them and by jq:
//
//	{"body":"Use Postgres.","from":"leader","id":"0193a1c2-...","kind":"response","priority":"normal","read":false,"run":"r1","subject":"response","task":"t1","timestamp":"2026-11-29T21:04:05.123Z","to":"t1","type":"coordination"}
type Mail struct {
	// ID ("id") identifies the message within the agent's tree. A run
	// message's copy carries the run message's UUIDv7; crew mail send makes
	// a new UUIDv7. Mail written by other tools may have no id: Parse leaves
	// ID empty then, and List and Find use the file name without ".json"
	// (unique within a directory, like a Maildir key).
	ID string
	// From ("from") is the sending agent; it is part of the file name.
	From string
	// To ("to") is the receiving agent (or "*" for a broadcast copy).
	To string
	// Type ("type") is one of Types.
	Type string
	// Subject ("subject") is a one-line summary. UTF-8.
	Subject string
	// Body ("body") is the message text. UTF-8; size limits are the
	// sender's business (docs/files.md, Body limit: --max-body).
	Body string
	// Timestamp ("timestamp") is the send time, stored in RFC 3339 UTC with
	// milliseconds ("2026-03-05T10:30:00.123Z"). Parse accepts any RFC 3339
	// time (with or without fractional seconds, "Z" or an offset) and
	// returns it in UTC, cut to whole milliseconds.
	Timestamp time.Time
	// Read ("read") tells whether the recipient has read the message. For a
	// run message's copy it mirrors the run's delivery status (docs/mail-tree.md, Read flags).
	Read bool
	// Priority ("priority") is one of events.Priorities: low, normal,
	// high or urgent.
	Priority string
	// Run, Task and Kind ("run", "task", "kind") are set only on the copy of
	// a run message: its run id, task id and message kind (docs/files.md, Messages). They
	// are left out of the JSON when empty.
	Run, Task, Kind string
	// Extra holds every other key found by Parse, compacted, and is written
	// back unchanged by Marshal, so that keys crew does not know survive a
	// rewrite. Its keys may not be any of the keys above.
	Extra map[string]json.RawMessage
}

// Parse decodes the content of one mail file: a JSON object, compact or
// pretty-printed (a leading UTF-8 byte order mark is ignored). Missing keys
// and null values leave their field zero (a missing "id" gives ID ""; see
// Mail.ID); keys not in Mail go to Extra. It returns an error if data is
// not one JSON object, or a known key has a value of the wrong JSON type, or
// "timestamp" is not an RFC 3339 time within years 0000-9999 (UTC). Invalid
// UTF-8 in strings is replaced by U+FFFD, as encoding/json does.
func Parse(data []byte) (Mail, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return Mail{}, fmt.Errorf("parse mail: %w", err)
	}
	if obj == nil {
		return Mail{}, errors.New("parse mail: not a JSON object")
	}
	var m Mail
	strs := map[string]*string{
		"id": &m.ID, "from": &m.From, "to": &m.To, "type": &m.Type,
		"subject": &m.Subject, "body": &m.Body, "priority": &m.Priority,
		"run": &m.Run, "task": &m.Task, "kind": &m.Kind,
	}
	for key, raw := range obj {
		var err error
		switch p := strs[key]; {
		case p != nil:
			err = json.Unmarshal(raw, p)
		case key == "read":
			err = json.Unmarshal(raw, &m.Read)
		case key == "timestamp":
			var s *string
			if err = json.Unmarshal(raw, &s); err == nil && s != nil {
				m.Timestamp, err = parseTime(*s)
			}
		default:
			var buf bytes.Buffer
			if err = json.Compact(&buf, raw); err == nil {
				if m.Extra == nil {
					m.Extra = make(map[string]json.RawMessage)
				}
				m.Extra[key] = buf.Bytes()
			}
		}
		if err != nil {
			return Mail{}, fmt.Errorf("parse mail: key %q: %w", key, err)
		}
	}
	return m, nil
}

// ParseMessage is Parse for a file of a mail tree, which must be a
// message: besides being one JSON object, it must name its sender
// ("from") and its time ("timestamp"), which its name and its place in
// time order are made of (docs/mail-tree.md, Fields; the recipient is the
// directory it is in, so a missing "to" reads as empty). Anything else
// (`{}`, another tool's JSON file) is an error wrapping crew.ErrDamaged,
// naming the keys it lacks.
func ParseMessage(data []byte) (Mail, error) {
	m, err := Parse(data)
	if err != nil {
		return m, fmt.Errorf("%w: %w", crew.ErrDamaged, err)
	}
	var missing []string
	for _, kv := range [...]struct {
		key   string
		empty bool
	}{{"from", m.From == ""}, {"timestamp", m.Timestamp.IsZero()}} {
		if kv.empty {
			missing = append(missing, strconv.Quote(kv.key))
		}
	}
	if len(missing) > 0 {
		return m, fmt.Errorf("%w: not a message: no %s", crew.ErrDamaged, strings.Join(missing, ", "))
	}
	return m, nil
}

// parseTime parses an RFC 3339 time (fractional seconds optional) and
// returns it in UTC, cut to whole milliseconds, the precision of a stored
// timestamp, so that Parse(Marshal(m)) gives m back.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, err
	}
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, fmt.Errorf("time %q is outside years 0000-9999 in UTC", s)
	}
	return t.Add(-time.Duration(t.Nanosecond() % int(time.Millisecond))), nil
}

// Marshal encodes m as a mail file's content: one compact JSON object with
// keys in sorted (byte) order, followed by "\n". "id", "run", "task" and
// "kind" are left out when empty; the other keys of docs/mail-tree.md are always
// written; Timestamp is written in UTC with milliseconds (sub-millisecond
// digits are cut). <, > and & are not escaped, so the file reads as
// written. It returns an error wrapping crew.ErrInvalid if a string or an
// Extra key is not valid UTF-8 (nothing is silently altered), an Extra key
// is one of Mail's own keys, an Extra value is not valid JSON, or Timestamp
// lies outside years 0000-9999.
func (m Mail) Marshal() ([]byte, error) {
	if y := m.Timestamp.UTC().Year(); y < 0 || y > 9999 {
		return nil, fmt.Errorf("mail timestamp %s is outside years 0000-9999: %w", m.Timestamp, crew.ErrInvalid)
	}
	f := mailFile{Body: m.Body, From: m.From, ID: m.ID, Kind: m.Kind, Priority: m.Priority, Read: m.Read, Run: m.Run,
		Subject: m.Subject, Task: m.Task, Timestamp: m.Timestamp.UTC().Format(timeLayout), To: m.To, Type: m.Type}
	for _, kv := range [...][2]string{{"body", f.Body}, {"from", f.From}, {"id", f.ID}, {"kind", f.Kind}, {"priority", f.Priority},
		{"run", f.Run}, {"subject", f.Subject}, {"task", f.Task}, {"to", f.To}, {"type", f.Type}} {
		if !utf8.ValidString(kv[1]) {
			return nil, fmt.Errorf("mail %q is not valid UTF-8: %w", kv[0], crew.ErrInvalid)
		}
	}
	if len(m.Extra) == 0 {
		return encode(f)
	}
	obj := map[string]any{
		"from": f.From, "to": f.To, "type": f.Type, "subject": f.Subject,
		"body": f.Body, "priority": f.Priority, "read": f.Read, "timestamp": f.Timestamp,
	}
	for key, v := range map[string]string{"id": f.ID, "run": f.Run, "task": f.Task, "kind": f.Kind} {
		if v != "" {
			obj[key] = v
		}
	}
	for key, raw := range m.Extra {
		switch {
		case slices.Contains(mailKeys, key):
			return nil, fmt.Errorf("mail extra key %q is a field of Mail: %w", key, crew.ErrInvalid)
		case !utf8.ValidString(key):
			return nil, fmt.Errorf("mail extra key %q is not valid UTF-8: %w", key, crew.ErrInvalid)
		case !json.Valid(raw):
			return nil, fmt.Errorf("mail extra key %q: value is not valid JSON: %w", key, crew.ErrInvalid)
		}
		obj[key] = raw
	}
	return encode(obj)
}

// mailFile is a mail file without extra keys, its fields in the sorted
// order of their keys: encoding/json writes a struct's fields in the order
// they are declared, so Marshal needs no map and no sort for it.
type mailFile struct {
	Body      string `json:"body"`
	From      string `json:"from"`
	ID        string `json:"id,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Priority  string `json:"priority"`
	Read      bool   `json:"read"`
	Run       string `json:"run,omitempty"`
	Subject   string `json:"subject"`
	Task      string `json:"task,omitempty"`
	Timestamp string `json:"timestamp"`
	To        string `json:"to"`
	Type      string `json:"type"`
}

// encode writes obj (a map, whose keys encoding/json sorts, or a
// mailFile) as compact JSON and a trailing newline, without HTML escaping.
func encode(obj any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, fmt.Errorf("encode mail: %v: %w", err, crew.ErrInvalid)
	}
	return buf.Bytes(), nil
}

// MarshalJSON returns Marshal's encoding without the trailing newline, so
// that a Mail inside other JSON (crew's --json output) has the keys of the
// file.
func (m Mail) MarshalJSON() ([]byte, error) {
	b, err := m.Marshal()
	return bytes.TrimSuffix(b, []byte("\n")), err
}

// UnmarshalJSON decodes data with Parse.
func (m *Mail) UnmarshalJSON(data []byte) error {
	p, err := Parse(data)
	if err != nil {
		return err
	}
	*m = p
	return nil
}

// File returns the file that delivers m to a mail tree, as every Store
// writes it (docs/mail-tree.md): its name (Name) and its content
// (Marshal), m with an empty Priority given events.DefaultPriority. It
// returns an error wrapping crew.ErrInvalid, and no file, for a bad id or
// sender, a type not in Types, a priority not in events.Priorities, a
// zero Timestamp, or content Marshal refuses.
func File(m Mail) (name string, data []byte, err error) {
	if m.Priority == "" {
		m.Priority = events.DefaultPriority
	}
	if err := checkFields(m); err != nil {
		return "", nil, err
	}
	if data, err = m.Marshal(); err != nil {
		return "", nil, err
	}
	if m.Run != "" && m.Read {
		data = padReadFlag(data) // a run message's copy, read (padReadFlag)
	}
	return Name(m), data, nil
}

// Check returns the error Deliver would return for m before writing
// anything: File's.
func Check(m Mail) error {
	_, _, err := File(m)
	return err
}

// checkFields checks what Deliver needs of m beyond Marshal.
func checkFields(m Mail) error {
	if err := crew.ValidateID("message", m.ID); err != nil {
		return err
	}
	if err := crew.ValidateID("agent", m.From); err != nil {
		return fmt.Errorf("from: %w", err)
	}
	if !slices.Contains(Types, m.Type) {
		return fmt.Errorf("mail type %q is not one of %s: %w", m.Type, strings.Join(Types, ", "), crew.ErrInvalid)
	}
	if !slices.Contains(events.Priorities, m.Priority) {
		return fmt.Errorf("priority %q is not one of %s: %w", m.Priority, strings.Join(events.Priorities, ", "), crew.ErrInvalid)
	}
	if m.Timestamp.IsZero() {
		return fmt.Errorf("mail has no timestamp: %w", crew.ErrInvalid)
	}
	return nil
}

// WithRead returns data (a mail file's content) with "read" set to read:
// how every Store changes a read flag (docs/mail-tree.md, Read flags). When
// data has exactly one top-level "read" key with a boolean value, only that
// value's bytes change (a pretty-printed file stays pretty-printed);
// otherwise the object is re-encoded compact with sorted keys. A run
// message's copy set read gets the value "true " (padReadFlag), as File
// writes it.
func WithRead(data []byte, read bool) ([]byte, error) {
	lit := []byte(fmt.Sprint(read))
	if start, end, ok := readFlagRange(data); ok {
		out := slices.Concat(data[:start], lit, data[end:])
		if read {
			if m, err := Parse(out); err == nil && m.Run != "" {
				out = padReadFlag(out)
			}
		}
		return out, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), &obj); err != nil {
		return nil, err
	}
	obj["read"] = lit
	return encode(obj)
}

// readFlagRange returns the byte range of the value of the only top-level
// "read" key of the JSON object in data, if that value is true or false.
func readFlagRange(data []byte) (start, end int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, 0, false
	}
	found := false
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return 0, 0, false
		}
		if key != "read" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return 0, 0, false
			}
			continue
		}
		tok, err := dec.Token()
		b, isBool := tok.(bool)
		if err != nil || !isBool || found {
			return 0, 0, false
		}
		end = int(dec.InputOffset())
		start = end - len(fmt.Sprint(b))
		if start < 0 || string(data[start:end]) != fmt.Sprint(b) {
			return 0, 0, false
		}
		found = true
	}
	return start, end, found
}
