package mailbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/fsys"
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

// treePriorities are the priorities Deliver accepts (docs/concepts.md, Priorities); "" is
// delivered as "normal".
var treePriorities = []string{"low", "normal", "high", "urgent"}

// treeKeys are the JSON keys that map to fields of Mail; every other key of
// a mail file goes to Mail.Extra.
var treeKeys = []string{"body", "from", "id", "kind", "priority", "read", "run", "subject", "task", "timestamp", "to", "type"}

// Layouts of a mail timestamp: in the file (RFC 3339, UTC, milliseconds)
// and in the file name (the same with colons replaced by dashes, because
// colons are not allowed in Windows file names).
const (
	treeTimeLayout  = "2006-01-02T15:04:05.000Z"
	treeStampLayout = "2006-01-02T15-04-05.000Z"
)

// createLock returns the path of the lock file that creators of
// mailboxes take in turn: beside the tree's root, not in it, where every
// entry is an agent's directory (.crew/state/.mail.lock).
func (t Tree) createLock() string {
	return filepath.Join(filepath.Dir(t.Root), "."+filepath.Base(t.Root)+".lock")
}

// ArchiveDir is the name of the sub-directory of an agent's mail directory
// that Archive moves old messages into.
const ArchiveDir = "archive"

// treeTempPrefix starts the name of every temporary file Deliver and
// SetRead write. It starts with a dot, so readers skip it (Maildir's rule
// for tmp/, https://cr.yp.to/proto/maildir.html, in one directory).
const treeTempPrefix = ".tmp-"

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
	// Priority ("priority") is low, normal, high or urgent.
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
				m.Timestamp, err = treeParseTime(*s)
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

// treeParseTime parses an RFC 3339 time (fractional seconds optional) and
// returns it in UTC, cut to whole milliseconds, the precision of a stored
// timestamp, so that Parse(Marshal(m)) gives m back.
func treeParseTime(s string) (time.Time, error) {
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
		Subject: m.Subject, Task: m.Task, Timestamp: m.Timestamp.UTC().Format(treeTimeLayout), To: m.To, Type: m.Type}
	for _, kv := range [...][2]string{{"body", f.Body}, {"from", f.From}, {"id", f.ID}, {"kind", f.Kind}, {"priority", f.Priority},
		{"run", f.Run}, {"subject", f.Subject}, {"task", f.Task}, {"to", f.To}, {"type", f.Type}} {
		if !utf8.ValidString(kv[1]) {
			return nil, fmt.Errorf("mail %q is not valid UTF-8: %w", kv[0], crew.ErrInvalid)
		}
	}
	if len(m.Extra) == 0 {
		return treeEncode(f)
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
		case slices.Contains(treeKeys, key):
			return nil, fmt.Errorf("mail extra key %q is a field of Mail: %w", key, crew.ErrInvalid)
		case !utf8.ValidString(key):
			return nil, fmt.Errorf("mail extra key %q is not valid UTF-8: %w", key, crew.ErrInvalid)
		case !json.Valid(raw):
			return nil, fmt.Errorf("mail extra key %q: value is not valid JSON: %w", key, crew.ErrInvalid)
		}
		obj[key] = raw
	}
	return treeEncode(obj)
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

// treeEncode writes obj (a map, whose keys encoding/json sorts, or a
// mailFile) as compact JSON and a trailing newline, without HTML escaping.
func treeEncode(obj any) ([]byte, error) {
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

// Name returns the file name of m in a mail tree (docs/mail-tree.md):
// <stamp>-<from>-<id>.json, where <stamp> is m.Timestamp in UTC as
// 2006-01-02T15-04-05.000Z (RFC 3339 with colons replaced by dashes and
// milliseconds kept), e.g. "2026-03-05T10-30-00.123Z-leader-0193a1c2-....json".
// Names of messages from one tree sort in time order, like Maildir's
// unique names (https://cr.yp.to/proto/maildir.html). Name does not check
// From or ID; Deliver does.
func Name(m Mail) string {
	return m.Timestamp.UTC().Format(treeStampLayout) + "-" + m.From + "-" + m.ID + ".json"
}

// Tree is a per-agent mail tree (docs/mail-tree.md): Root/<agent>/ holds one file per
// message, named by Name, and Root/<agent>/archive/ holds archived ones.
// Delivery follows Maildir (https://cr.yp.to/proto/maildir.html): write a
// hidden temp file in the recipient's directory, fsync(2) it, link(2) it to
// its final name, which never overwrites, and fsync(2) the directory. The
// hidden temp file stands in for Maildir's tmp/, and the flat directory for
// new/ and cur/, so that trees written by mail-async tools are read as they
// are. Writes never go through a symbolic link: an agent directory or
// archive directory that is a symlink is refused, and every file operation
// is confined to the agent directory (os.Root), so no id or link escapes
// the tree (docs/files.md, Permissions).
//
// Tree is a value: the zero Perm means crew.PrivatePerm. Any number of
// processes may deliver to one tree at once without a lock; see SetRead and
// Archive for what they do when they race.
type Tree struct {
	Root string    // the tree's directory, .crew/state/mail
	Perm crew.Perm // modes of new files and directories (docs/files.md, Permissions)
}

// perm returns t.Perm with zero modes replaced by crew.PrivatePerm's.
func (t Tree) perm() crew.Perm {
	p := t.Perm
	if p.File == 0 {
		p.File = crew.PrivatePerm.File
	}
	if p.Dir == 0 {
		p.Dir = crew.PrivatePerm.Dir
	}
	return p
}

// Dir returns the path of agent's mail directory, Root/<agent>. It does not
// check agent; the methods that touch the disk do.
func (t Tree) Dir(agent string) string { return filepath.Join(t.Root, agent) }

// Exists reports whether agent has a mailbox: agent is a valid id (docs/concepts.md, Identifiers)
// and Root/<agent> is a directory, not a symbolic link to one.
func (t Tree) Exists(agent string) bool {
	if crew.ValidateID("agent", agent) != nil {
		return false
	}
	fi, err := os.Lstat(t.Dir(agent))
	return err == nil && fi.IsDir()
}

// Create makes agent's mailbox, Root/<agent>/ and Root/<agent>/archive/
// (and Root if missing), with mode t.Perm.Dir (set exactly, whatever the
// umask). It succeeds if they already exist, like mkdir -p. It returns an
// error wrapping crew.ErrInvalid for an invalid agent id (docs/concepts.md, Identifiers),
// crew.ErrConflict if a mailbox whose name differs only in case exists
// (case-insensitive file systems), and an error if Root/<agent> or its
// archive is a symbolic link or not a directory.
func (t Tree) Create(agent string) error {
	if err := crew.ValidateID("agent", agent); err != nil {
		return err
	}
	perm := t.perm()
	if _, err := os.Lstat(t.Root); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(t.Root, perm.Dir); err != nil {
			return fmt.Errorf("create mail tree: %w", err)
		}
		if err := os.Chmod(t.Root, perm.Dir); err != nil {
			return fmt.Errorf("create mail tree: %w", err)
		}
	}
	// One creator at a time, from the check for a name in use (in any
	// letter case) to the new directory (docs/concepts.md, Identifiers).
	unlock, err := fsys.LockFile(t.createLock(), perm.File)
	if err != nil {
		return fmt.Errorf("create mailbox for agent %s: %w", agent, err)
	}
	defer unlock()
	agents, err := t.Agents()
	if err != nil {
		return err
	}
	for _, a := range agents {
		if a != agent && crew.SameID(a, agent) {
			return crew.Taken("mailbox", agent, a, "")
		}
	}
	mroot, err := os.OpenRoot(t.Root)
	if err != nil {
		return fmt.Errorf("create mailbox for agent %s: %w", agent, err)
	}
	defer mroot.Close()
	if err := treeMkdir(mroot, agent, perm.Dir); err != nil {
		return fmt.Errorf("create mailbox for agent %s: %w", agent, err)
	}
	r, err := t.openAgent(agent, false)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := treeMkdir(r, ArchiveDir, perm.Dir); err != nil {
		return fmt.Errorf("create mailbox for agent %s: %w", agent, err)
	}
	return nil
}

// treeMkdir makes directory name in r with mode perm (set exactly), unless
// a real directory of that name exists. A symbolic link is refused.
func treeMkdir(r *os.Root, name string, perm os.FileMode) error {
	err := r.Mkdir(name, perm&fs.ModePerm) // os.Root refuses setgid here; Chmod sets it
	if err == nil {
		return r.Chmod(name, perm)
	}
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := r.Lstat(name)
	switch {
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link; crew does not write through links: %w", filepath.Join(r.Name(), name), crew.ErrTampered)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory: %w", filepath.Join(r.Name(), name), crew.ErrTampered)
	}
	return nil
}

// Agents returns the names of the mailboxes in the tree, sorted: the
// sub-directories of Root that are valid agent ids (docs/concepts.md, Identifiers), not symbolic
// links and not hidden. A missing Root has no agents (nil, nil).
func (t Tree) Agents() ([]string, error) {
	des, err := os.ReadDir(t.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list mailboxes: %w", err)
	}
	var agents []string
	for _, de := range des {
		if de.IsDir() && crew.ValidateID("agent", de.Name()) == nil {
			agents = append(agents, de.Name())
		}
	}
	return agents, nil // os.ReadDir sorts by name
}

// openAgent opens agent's mail directory as an os.Root, so that nothing
// done through it leaves the directory. It refuses an invalid id
// (crew.ErrInvalid), a missing directory (crew.ErrNotFound; the message
// names --create-recipient if forDelivery), and a symbolic link.
func (t Tree) openAgent(agent string, forDelivery bool) (*os.Root, error) {
	if err := crew.ValidateID("agent", agent); err != nil {
		return nil, err
	}
	notFound := func() error {
		if forDelivery {
			return fmt.Errorf("no mailbox for agent %s; create it with --create-recipient: %w", agent, crew.ErrNotFound)
		}
		return fmt.Errorf("no mailbox for agent %s: %w", agent, crew.ErrNotFound)
	}
	mroot, err := os.OpenRoot(t.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notFound()
	}
	if err != nil {
		return nil, fmt.Errorf("open mail tree: %w", err)
	}
	defer mroot.Close()
	fi, err := mroot.Lstat(agent)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, notFound()
	case err != nil:
		return nil, fmt.Errorf("open mailbox for agent %s: %w", agent, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("mailbox for agent %s: %s is a symbolic link; crew does not write through links: %w", agent, t.Dir(agent), crew.ErrTampered)
	case !fi.IsDir():
		return nil, fmt.Errorf("mailbox for agent %s: %s is not a directory: %w", agent, t.Dir(agent), crew.ErrTampered)
	}
	r, err := mroot.OpenRoot(agent)
	if err != nil {
		return nil, fmt.Errorf("open mailbox for agent %s: %w", agent, err)
	}
	// The directory could have been swapped for a link between Lstat and
	// OpenRoot: make sure the one opened is the one checked.
	if st, err := r.Stat("."); err != nil || !os.SameFile(fi, st) {
		r.Close()
		return nil, fmt.Errorf("mailbox for agent %s: %s changed while it was opened: %w", agent, t.Dir(agent), crew.ErrTampered)
	}
	return r, nil
}

// Deliver writes m into agent's mail directory as the file Name(m) and
// returns that name. Following Maildir (https://cr.yp.to/proto/maildir.html)
// it writes a hidden temp file ".tmp-<uuid>" in the directory with mode
// t.Perm.File, fsync(2)s it if sync, link(2)s it to the final name (which
// never overwrites), removes the temp file and fsync(2)s the directory if
// sync. A crash leaves either no message or a complete one (plus, at worst,
// a hidden temp file that readers skip). sync=false is for projections
// (docs/mail-tree.md, Copies of run messages): the fsynced log can deliver a lost copy again.
//
// Delivery is idempotent: if a file of that name already exists in the
// directory or in archive/ and holds a message with the same id, Deliver
// writes nothing and returns the name and nil (its read flag is left as
// it is; see SetRead). A file of that name with another id, or any other
// file that is whole JSON, or a symbolic link, is an error wrapping
// crew.ErrConflict. A regular file of that name that holds no JSON at all
// (empty, cut short or zero-filled: a copy whose name survived a power
// cut and whose data, never fsynced, did not) is an earlier copy of the
// same message, since the name carries its id: it is replaced atomically
// by a rename, where it is (in archive/ too), and the message read again
// whole. On a file system without hard links the link falls back to a
// rename after checking the name is free.
//
// An empty m.Priority is delivered as "normal". Deliver returns an error
// wrapping crew.ErrInvalid, and writes nothing, if agent, m.From or m.ID is
// not a valid id (docs/concepts.md, Identifiers), m.Type is not one of Types, m.Priority is not
// low, normal, high or urgent, m.Timestamp is zero, or Marshal fails; one
// wrapping crew.ErrNotFound if agent has no mailbox; an error if the
// mailbox is a symbolic link or not a directory; and any I/O error, after
// removing its temp file.
func (t Tree) Deliver(agent string, m Mail, sync bool) (name string, err error) {
	if err := crew.ValidateID("agent", agent); err != nil {
		return "", err
	}
	d, err := t.openDir(agent, true)
	if err != nil {
		return "", err
	}
	defer d.Close()
	return d.Deliver(m, sync)
}

// treeCheck checks what Deliver needs of m beyond Marshal.
func treeCheck(m Mail) error {
	if err := crew.ValidateID("message", m.ID); err != nil {
		return err
	}
	if err := crew.ValidateID("agent", m.From); err != nil {
		return fmt.Errorf("from: %w", err)
	}
	if !slices.Contains(Types, m.Type) {
		return fmt.Errorf("mail type %q is not one of %s: %w", m.Type, strings.Join(Types, ", "), crew.ErrInvalid)
	}
	if !slices.Contains(treePriorities, m.Priority) {
		return fmt.Errorf("priority %q is not one of %s: %w", m.Priority, strings.Join(treePriorities, ", "), crew.ErrInvalid)
	}
	if m.Timestamp.IsZero() {
		return fmt.Errorf("mail has no timestamp: %w", crew.ErrInvalid)
	}
	return nil
}

// treeSyncExisting makes an already delivered file durable if sync: it may
// have been written by a delivery that did not fsync.
func treeSyncExisting(r *os.Root, rel string, sync bool) error {
	if !sync {
		return nil
	}
	f, err := r.Open(rel)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = treeSyncDir(r, filepath.Dir(rel))
	}
	return err
}

// treeLink gives the file oldname the name newname without ever replacing
// an existing newname: link(2), whose EEXIST comes back as an error
// wrapping fs.ErrExist. Where hard links fail for another reason (file
// systems without them), it renames after checking that newname is free;
// that leaves a window in which a file created by someone else at the same
// moment could be replaced.
func treeLink(r *os.Root, oldname, newname string) error {
	if err := fsys.Check(fsys.OpLink, filepath.Join(r.Name(), newname)); err != nil {
		return err
	}
	err := r.Link(oldname, newname)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	if _, lerr := r.Lstat(newname); lerr == nil {
		return &fs.PathError{Op: "link", Path: newname, Err: fs.ErrExist}
	}
	if rerr := r.Rename(oldname, newname); rerr != nil {
		return err
	}
	return nil
}

// treeSyncDir fsync(2)s the directory rel of r, which makes the names
// created, renamed or removed in it durable. Windows cannot sync a
// directory (and needs not).
func treeSyncDir(r *os.Root, rel string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := r.Open(rel)
	if err != nil {
		return err
	}
	err = fsys.SyncFile(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Entry is one message file of a mail tree, as List and Find return it.
type Entry struct {
	Name     string // file name, e.g. 2026-03-05T10-30-00.123Z-leader-<id>.json
	Path     string // path of the file: Root/<agent>/[archive/]<Name>
	Mail     Mail   // the parsed content; Mail.ID is the file name without ".json" when the file has no id
	Archived bool   // the file is in archive/
}

// treeFile is an Entry with what SetRead needs to rewrite it.
type treeFile struct {
	Entry
	rel  string      // path relative to the agent directory
	data []byte      // the bytes read
	info fs.FileInfo // of the file read, to notice a concurrent replacement
}

// List returns agent's messages, in time order (by Timestamp, then Name:
// names of other tools without milliseconds do not sort with crew's within
// one second), and with includeArchive also those in archive/ (mixed in,
// marked Archived). It skips hidden files (names starting with ".", such as
// temp files of Deliver or of other tools) and sub-directories, as Maildir
// readers do (https://cr.yp.to/proto/maildir.html). A file that cannot be
// read or parsed, or is not a regular file (e.g. a symbolic link, which is
// not followed), or an archive/ that is a symbolic link, is reported in the
// []error, each naming its path (parse errors wrap crew.ErrDamaged), and
// the rest are still listed. The error is for the mailbox as a whole:
// crew.ErrInvalid for a bad agent id, crew.ErrNotFound for a missing
// mailbox, or a failure to read the directory.
func (t Tree) List(agent string, includeArchive bool) ([]Entry, []error, error) {
	r, err := t.openAgent(agent, false)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	dirs := []string{"."}
	if includeArchive {
		dirs = append(dirs, ArchiveDir)
	}
	var entries []Entry
	var errs []error
	for _, dir := range dirs {
		files, ferrs, err := t.readDir(r, agent, dir, func(string) bool { return true })
		if err != nil {
			return nil, nil, err
		}
		errs = append(errs, ferrs...)
		for _, f := range files {
			entries = append(entries, f.Entry)
		}
	}
	slices.SortStableFunc(entries, func(a, b Entry) int {
		if c := a.Mail.Timestamp.Compare(b.Mail.Timestamp); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return entries, errs, nil
}

// readDir reads the message files of dir ("." or ArchiveDir) in r whose
// names pass want, sorted by name. A missing archive/ is empty; an archive/
// that is a symbolic link is reported as a file error and not read.
func (t Tree) readDir(r *os.Root, agent, dir string, want func(name string) bool) ([]treeFile, []error, error) {
	archived := dir == ArchiveDir
	if archived {
		fi, err := r.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, nil, nil
		case err != nil:
			return nil, []error{err}, nil
		case !fi.IsDir():
			return nil, []error{fmt.Errorf("%s is not a directory; not read: %w", filepath.Join(t.Dir(agent), dir), crew.ErrTampered)}, nil
		}
	}
	d, err := r.Open(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read mailbox of agent %s: %w", agent, err)
	}
	des, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("read mailbox of agent %s: %w", agent, err)
	}
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var files []treeFile
	var errs []error
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") || de.IsDir() || !want(name) {
			continue
		}
		f, err := t.readEntry(r, agent, dir, name, de.Type())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		files = append(files, f)
	}
	return files, errs, nil
}

// readEntry reads and parses the message file name in dir ("." or
// ArchiveDir) of r, whose type (from its directory entry or Lstat) is typ.
// Symbolic links and other non-regular files are refused, not followed.
func (t Tree) readEntry(r *os.Root, agent, dir, name string, typ fs.FileMode) (treeFile, error) {
	rel := filepath.Join(dir, name)
	f := treeFile{Entry: Entry{Name: name, Path: filepath.Join(t.Dir(agent), rel), Archived: dir == ArchiveDir}, rel: rel}
	if typ&fs.ModeSymlink != 0 {
		return f, fmt.Errorf("mail %s: a symbolic link; not followed: %w", f.Path, crew.ErrTampered)
	} else if !typ.IsRegular() {
		return f, fmt.Errorf("mail %s: not a regular file (%s); not read: %w", f.Path, typ, crew.ErrTampered)
	}
	var err error
	f.data, f.info, err = treeReadFile(r, rel)
	if err != nil {
		return f, fmt.Errorf("mail %s: %w", f.Path, err)
	}
	f.Mail, err = ParseMessage(f.data)
	if err != nil {
		return f, fmt.Errorf("mail %s: %w", f.Path, err)
	}
	if f.Mail.ID == "" {
		f.Mail.ID = strings.TrimSuffix(name, ".json")
	}
	return f, nil
}

// treeReadFile reads the regular file rel of r and returns its bytes and
// the FileInfo of the file read.
func treeReadFile(r *os.Root, rel string) ([]byte, fs.FileInfo, error) {
	f, err := r.Open(rel)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	data, err := io.ReadAll(f)
	return data, fi, err
}

// Find returns agent's message with this id, looking in the mail directory
// first and then in archive/. id may also be the message's file name, with
// or without ".json". A
// crew-written file is found by its name (<...>-<id>.json) without reading
// the others; otherwise every file is read. Files that cannot be read or
// parsed are passed over. It returns an error wrapping crew.ErrNotFound if
// there is no such message or no mailbox, crew.ErrInvalid for a bad agent
// id or an empty id.
func (t Tree) Find(agent, id string) (Entry, error) {
	r, err := t.openAgent(agent, false)
	if err != nil {
		return Entry{}, err
	}
	defer r.Close()
	f, err := t.find(r, agent, id)
	return f.Entry, err
}

// find is Find within an opened mailbox.
func (t Tree) find(r *os.Root, agent, id string) (treeFile, error) {
	if id == "" {
		return treeFile{}, fmt.Errorf("find mail of agent %s: empty message id: %w", agent, crew.ErrInvalid)
	}
	byName := func(name string) bool {
		return name == id || name == id+".json" || strings.HasSuffix(name, "-"+id+".json")
	}
	match := func(f treeFile) bool { return f.Mail.ID == id || f.Name == id || f.Name == id+".json" }
	if strings.HasSuffix(id, ".json") && !strings.HasPrefix(id, ".") && !strings.ContainsAny(id, `/\`) {
		// A whole file name (what crew's own projections pass): open it
		// directly instead of reading a directory that may hold many
		// thousands of messages. Only a file by that name that cannot be
		// read sends the search on to the directories.
		exists := false
		for _, dir := range []string{".", ArchiveDir} {
			if dir == ArchiveDir {
				if fi, err := r.Lstat(dir); err != nil || !fi.IsDir() {
					break
				}
			}
			fi, err := r.Lstat(filepath.Join(dir, id))
			if err != nil {
				continue
			}
			exists = true
			if f, err := t.readEntry(r, agent, dir, id, fi.Mode().Type()); err == nil {
				return f, nil
			}
		}
		if !exists {
			return treeFile{}, fmt.Errorf("no message %s for agent %s: %w", id, agent, crew.ErrNotFound)
		}
	}
	var named error // why a file named like id could not be read
	for _, dir := range []string{".", ArchiveDir} {
		// The name of a crew-written file ends in its id: try those first.
		for i, want := range []func(string) bool{byName, func(n string) bool { return !byName(n) }} {
			files, ferrs, err := t.readDir(r, agent, dir, want)
			if err != nil {
				return treeFile{}, err
			}
			for _, f := range files {
				if match(f) {
					return f, nil
				}
			}
			if i == 0 && named == nil && len(ferrs) > 0 {
				named = ferrs[0]
			}
		}
	}
	if named != nil {
		return treeFile{}, named
	}
	return treeFile{}, fmt.Errorf("no message %s for agent %s: %w", id, agent, crew.ErrNotFound)
}

// SetRead sets the read flag of agent's message id (see Find; in the mail
// directory or archive/) to read. It replaces the file atomically: it
// writes a hidden temp file in the same directory (mode t.Perm.File,
// fsync(2)ed if sync) and renames it over the file's name, then fsync(2)s
// the directory if sync; readers see the old file or the new, never a mix.
// Only the value of "read" changes: every other byte is kept (if the file
// has no top-level "read" key, or more than one, it is rewritten compact
// with sorted keys, its keys and values kept). If the flag is already read,
// nothing is written.
//
// Just before the rename it checks that the name still holds the file it
// read; if Archive or another SetRead replaced or moved it meanwhile, it
// starts over (up to 3 times, then an error wrapping crew.ErrConflict). Its
// errors are Find's, that one, and I/O errors (after removing its temp
// file).
func (t Tree) SetRead(agent, id string, read bool, sync bool) error {
	d, err := t.openDir(agent, false)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.SetRead(id, read, sync)
}

// RemoveCopies removes from agent's mail directory and archive/ the
// copies of run's messages that keep does not want (keep gets the message
// id): copies are projections of the run's log (docs/mail-tree.md, Copies
// of run messages), so one of a message the log no longer holds (crew
// repair quarantined it) must not outlive it. Plain mail and other runs'
// copies are left alone, and so are files that cannot be read. It returns
// how many it removed; errors are openAgent's and those of the removals.
func (t Tree) RemoveCopies(agent, run string, keep func(id string) bool) (int, error) {
	r, err := t.openAgent(agent, false)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n := 0
	var errs []error
	for _, dir := range []string{".", ArchiveDir} {
		files, _, err := t.readDir(r, agent, dir, func(string) bool { return true })
		if err != nil {
			return n, err
		}
		removed := false
		for _, f := range files {
			if f.Mail.Run != run || keep(f.Mail.ID) {
				continue
			}
			if err := r.Remove(f.rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove %s: %w", f.Path, err))
				continue
			}
			n++
			removed = true
		}
		if removed {
			if err := treeSyncDir(r, dir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return n, errors.Join(errs...)
}

// treeSetReadBytes returns data (a mail file) with "read" set to read. When
// data has exactly one top-level "read" key with a boolean value, only that
// value's bytes change (a pretty-printed file stays pretty-printed);
// otherwise the object is re-encoded compact with sorted keys.
func treeSetReadBytes(data []byte, read bool) ([]byte, error) {
	lit := []byte(fmt.Sprint(read))
	if start, end, ok := treeFindRead(data); ok {
		return slices.Concat(data[:start], lit, data[end:]), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), &obj); err != nil {
		return nil, err
	}
	obj["read"] = lit
	return treeEncode(obj)
}

// treeFindRead returns the byte range of the value of the only top-level
// "read" key of the JSON object in data, if that value is true or false.
func treeFindRead(data []byte) (start, end int, ok bool) {
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

// staleTemp is how old a temp file of Deliver or SetRead must be for
// Archive to remove it: Maildir's rule for tmp/ (36 hours,
// https://cr.yp.to/proto/maildir.html), since a delivery that old was
// killed and will never finish.
const staleTemp = 36 * time.Hour

// removeStaleTemps removes the temp files (treeTempPrefix) older than
// staleTemp from the mail directory r and its archive/, and reports how
// many it removed.
func removeStaleTemps(r *os.Root, now time.Time) int {
	n := 0
	for _, dir := range []string{".", ArchiveDir} {
		d, err := r.Open(dir)
		if err != nil {
			continue
		}
		des, _ := d.ReadDir(-1)
		d.Close()
		for _, de := range des {
			if !strings.HasPrefix(de.Name(), treeTempPrefix) || !de.Type().IsRegular() {
				continue
			}
			if fi, err := de.Info(); err == nil && now.Sub(fi.ModTime()) > staleTemp && r.Remove(filepath.Join(dir, de.Name())) == nil {
				n++
			}
		}
	}
	return n
}

// Archive moves agent's messages older than olderThan (Timestamp before
// now minus olderThan) from the mail directory into archive/, and returns
// the names moved, in name order. It moves read messages only, unread ones
// too if includeUnread (docs/mail-tree.md, Archive: nothing disappears unseen). A move is
// link(2) into archive/ then unlink(2) of the old name, so it never
// overwrites: a message whose name is taken in archive/ by a different file
// is left where it is and reported (crew.ErrConflict); one taken by an
// identical file (a move cut short by a crash) has its old name removed.
// Both directories are fsync(2)ed afterwards. Files that cannot be parsed
// stay where they are (List reports them). archive/ is created if missing.
// Temp files left by killed deliveries are removed once older than 36
// hours (staleTemp, Maildir's rule).
//
// It returns the names moved together with an error joining every message
// that could not be moved, or an error for the mailbox as a whole:
// crew.ErrInvalid for a bad agent id, crew.ErrNotFound for a missing
// mailbox, a symbolic link for the mailbox or archive/, or an I/O error.
// A concurrent SetRead of a message being moved may leave it in both
// places (the copy in the mail directory then shows as new again).
func (t Tree) Archive(agent string, olderThan time.Duration, includeUnread bool, now time.Time) ([]string, error) {
	r, err := t.openAgent(agent, false)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := treeMkdir(r, ArchiveDir, t.perm().Dir); err != nil {
		return nil, fmt.Errorf("archive mail of agent %s: %w", agent, err)
	}
	removeStaleTemps(r, now)
	files, _, err := t.readDir(r, agent, ".", func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	cutoff := now.Add(-olderThan)
	var moved []string
	var errs []error
	for _, f := range files {
		if !f.Mail.Timestamp.Before(cutoff) || (!f.Mail.Read && !includeUnread) {
			continue
		}
		dst := filepath.Join(ArchiveDir, f.Name)
		err := treeLink(r, f.rel, dst)
		if errors.Is(err, fs.ErrExist) {
			if old, rerr := r.ReadFile(dst); rerr != nil || !bytes.Equal(old, f.data) {
				errs = append(errs, fmt.Errorf("archive %s: %s exists and differs; left in place: %w", f.Path, filepath.Join(t.Dir(agent), dst), crew.ErrConflict))
				continue
			}
			err = nil
		}
		if err == nil {
			err = r.Remove(f.rel)
			if errors.Is(err, fs.ErrNotExist) { // moved by the rename fallback
				err = nil
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("archive %s: %w", f.Path, err))
			continue
		}
		moved = append(moved, f.Name)
	}
	if len(moved) > 0 {
		for _, dir := range []string{ArchiveDir, "."} {
			if err := treeSyncDir(r, dir); err != nil {
				errs = append(errs, fmt.Errorf("archive mail of agent %s: %w", agent, err))
			}
		}
	}
	return moved, errors.Join(errs...)
}
