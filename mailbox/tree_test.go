package mailbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/crew-dev/crew"
)

// fixtureAgent is the mailbox in testdata/mail-async-tree, a copy of
// ../shared/fixtures/mail-async-tree (a tree written by mail-async tools).
const fixtureAgent = "polecat-alpha"

const (
	fixtureMayor    = "2026-03-05T10-30-00Z-mayor-a1b2c.json"
	fixtureWitness  = "2026-03-05T10-31-00Z-witness-d3e4f.json"
	fixtureTorn     = "2026-03-05T10-32-00Z-refinery-9f9f9.json"
	fixtureArchived = "2026-03-03T08-00-00Z-mayor-a1b2c.json"
)

// fixtureTree copies testdata/mail-async-tree/state/mail into a temporary
// directory (the fixture stays read-only) and returns a Tree on the copy.
func fixtureTree(t *testing.T) Tree {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "mail")
	copyDir(t, filepath.Join("testdata", "mail-async-tree", "state", "mail"), dst)
	return Tree{Root: dst, Perm: crew.PrivatePerm}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// newTree returns a Tree in a temporary directory with mailboxes for agents.
func newTree(t *testing.T, agents ...string) Tree {
	t.Helper()
	tr := Tree{Root: filepath.Join(t.TempDir(), ".crew", "state", "mail"), Perm: crew.PrivatePerm}
	for _, a := range agents {
		if err := tr.Create(a); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

var testTime = time.Date(2026, 3, 5, 10, 30, 0, 123_000_000, time.UTC)

func testMail(t *testing.T, at time.Time) Mail {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	return Mail{
		ID: id.String(), From: "leader", To: "t1", Type: "coordination",
		Subject: "response", Body: "Use Postgres.\n<b>&</b>", Timestamp: at,
		Priority: "normal", Run: "r1", Task: "t1", Kind: "response",
	}
}

// files returns the names of all entries in dir, hidden ones included.
func files(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		if !de.IsDir() {
			names = append(names, de.Name())
		}
	}
	return names
}

// topKeys returns the top-level keys of the JSON object in data, in the
// order they appear.
func topKeys(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %q", data)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// sameMail reports whether a and b are equal (timestamps compared as
// instants; both must be in UTC).
func sameMail(a, b Mail) bool {
	if !a.Timestamp.Equal(b.Timestamp) || a.Timestamp.Location() != time.UTC || b.Timestamp.Location() != time.UTC {
		return false
	}
	a.Timestamp, b.Timestamp = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

func TestFixtureCopyIsCurrent(t *testing.T) {
	shared := filepath.Join("..", "..", "shared", "fixtures", "mail-async-tree")
	if _, err := os.Stat(shared); err != nil {
		t.Skip("shared fixture not present:", err)
	}
	err := filepath.WalkDir(shared, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(shared, path)
		want, _ := os.ReadFile(path)
		got, err := os.ReadFile(filepath.Join("testdata", "mail-async-tree", rel))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("testdata/mail-async-tree/%s differs from %s; copy it again", rel, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestDeliver(t *testing.T) {
	for _, perm := range []crew.Perm{crew.PrivatePerm, crew.SharedPerm} {
		tr := newTree(t, "t1")
		tr.Perm = perm
		m := testMail(t, testTime)
		name, err := tr.Deliver("t1", m, true)
		if err != nil {
			t.Fatal(err)
		}
		if name != Name(m) {
			t.Errorf("Deliver = %s, want %s", name, Name(m))
		}
		if got := files(t, tr.Dir("t1")); !slices.Equal(got, []string{name}) {
			t.Errorf("files after Deliver = %v, want just %s (no temp file)", got, name)
		}
		fi, err := os.Stat(filepath.Join(tr.Dir("t1"), name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != perm.File.Perm() {
			t.Errorf("mode = %v, want %v", fi.Mode().Perm(), perm.File.Perm())
		}
		data, _ := os.ReadFile(filepath.Join(tr.Dir("t1"), name))
		if want, _ := m.Marshal(); !bytes.Equal(data, want) {
			t.Errorf("file = %s, want %s", data, want)
		}

		// Delivering the same message again (a projection copy) writes nothing.
		for _, sync := range []bool{false, true} {
			again, err := tr.Deliver("t1", m, sync)
			if err != nil || again != name {
				t.Errorf("Deliver again = %s, %v; want %s, nil", again, err, name)
			}
		}
		if got := files(t, tr.Dir("t1")); len(got) != 1 {
			t.Errorf("files after Deliver twice = %v, want one", got)
		}
	}
}

func TestDeliverDefaultsAndChecks(t *testing.T) {
	tr := Tree{Root: newTree(t, "bob").Root} // zero Perm: crew.PrivatePerm
	m := testMail(t, testTime)
	m.Priority = ""
	name, err := tr.Deliver("bob", m, false)
	if err != nil {
		t.Fatal(err)
	}
	e, err := tr.Find("bob", m.ID)
	if err != nil || e.Mail.Priority != "normal" || e.Name != name {
		t.Errorf("Find = %+v, %v; want priority normal", e, err)
	}
	if fi, _ := os.Stat(e.Path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode with zero Perm = %v, want 0600", fi.Mode().Perm())
	}

	bad := map[string]func(m *Mail){
		"no id":        func(m *Mail) { m.ID = "" },
		"id with path": func(m *Mail) { m.ID = "../x" },
		"bad from":     func(m *Mail) { m.From = "a/b" },
		"bad type":     func(m *Mail) { m.Type = "gossip" },
		"bad priority": func(m *Mail) { m.Priority = "asap" },
		"no time":      func(m *Mail) { m.Timestamp = time.Time{} },
		"bad body":     func(m *Mail) { m.Body = "\xff" },
	}
	for what, change := range bad {
		m := testMail(t, testTime)
		change(&m)
		if _, err := tr.Deliver("bob", m, true); !errors.Is(err, crew.ErrInvalid) {
			t.Errorf("%s: Deliver error = %v, want ErrInvalid", what, err)
		}
	}
	if _, err := tr.Deliver("../bob", testMail(t, testTime), true); !errors.Is(err, crew.ErrInvalid) {
		t.Errorf("Deliver to ../bob: error = %v, want ErrInvalid", err)
	}
	if got := files(t, tr.Dir("bob")); len(got) != 1 {
		t.Errorf("files = %v, want only the first message", got)
	}
}

func TestDeliverMissingAgent(t *testing.T) {
	tr := newTree(t, "bob")
	_, err := tr.Deliver("alice", testMail(t, testTime), true)
	if !errors.Is(err, crew.ErrNotFound) || !strings.Contains(err.Error(), "--create-recipient") {
		t.Errorf("Deliver to missing agent: error = %v, want ErrNotFound naming --create-recipient", err)
	}
	if _, err := os.Lstat(tr.Dir("alice")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Deliver created %s", tr.Dir("alice"))
	}
	// No tree at all.
	tr = Tree{Root: filepath.Join(t.TempDir(), "none")}
	if _, err := tr.Deliver("alice", testMail(t, testTime), true); !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("Deliver without a tree: error = %v, want ErrNotFound", err)
	}
}

func TestDeliverRefusesSymlink(t *testing.T) {
	tr := newTree(t)
	if err := os.MkdirAll(tr.Root, 0o700); err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	if err := os.Symlink(target, tr.Dir("eve")); err != nil {
		t.Skip("no symlinks:", err)
	}
	if tr.Exists("eve") {
		t.Error("Exists(symlink) = true")
	}
	if _, err := tr.Deliver("eve", testMail(t, testTime), true); err == nil || errors.Is(err, crew.ErrNotFound) {
		t.Errorf("Deliver through a symlink: error = %v, want a refusal", err)
	}
	if err := tr.Create("eve"); err == nil {
		t.Error("Create over a symlink succeeded")
	}
	if got, _ := os.ReadDir(target); len(got) != 0 {
		t.Errorf("files written at the link target: %v", got)
	}

	// A symlinked archive/ is not written through either.
	if err := tr.Create("bob"); err != nil {
		t.Fatal(err)
	}
	m := testMail(t, testTime)
	m.Read = true
	if _, err := tr.Deliver("bob", m, false); err != nil {
		t.Fatal(err)
	}
	arch := filepath.Join(tr.Dir("bob"), ArchiveDir)
	if err := os.Remove(arch); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, arch); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Archive("bob", 0, true, testTime.Add(time.Hour)); err == nil {
		t.Error("Archive into a symlinked archive/ succeeded")
	}
	if got, _ := os.ReadDir(target); len(got) != 0 {
		t.Errorf("files written at the link target: %v", got)
	}
	_, errs, err := tr.List("bob", true)
	if err != nil || len(errs) != 1 {
		t.Errorf("List with a symlinked archive/: errs %v, err %v; want it reported", errs, err)
	}
}

func TestDeliverConflict(t *testing.T) {
	tr := newTree(t, "bob")
	m := testMail(t, testTime)
	other := m
	other.ID = "someone-else"
	// Another message under m's name.
	data, _ := other.Marshal()
	if err := os.WriteFile(filepath.Join(tr.Dir("bob"), Name(m)), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Deliver("bob", m, true); !errors.Is(err, crew.ErrConflict) {
		t.Errorf("Deliver over another message: error = %v, want ErrConflict", err)
	}
	got, _ := os.ReadFile(filepath.Join(tr.Dir("bob"), Name(m)))
	if !bytes.Equal(got, data) {
		t.Error("Deliver overwrote an existing file")
	}
	if got := files(t, tr.Dir("bob")); len(got) != 1 {
		t.Errorf("files = %v, want one (no temp left)", got)
	}
}

func TestDeliverAfterArchive(t *testing.T) {
	tr := newTree(t, "bob")
	m := testMail(t, testTime)
	m.Read = true
	name, err := tr.Deliver("bob", m, true)
	if err != nil {
		t.Fatal(err)
	}
	if moved, err := tr.Archive("bob", time.Hour, false, testTime.Add(2*time.Hour)); err != nil || len(moved) != 1 {
		t.Fatalf("Archive = %v, %v", moved, err)
	}
	// The projection delivers the copy again: it stays archived.
	if again, err := tr.Deliver("bob", m, false); err != nil || again != name {
		t.Errorf("Deliver again = %s, %v", again, err)
	}
	if got := files(t, tr.Dir("bob")); len(got) != 0 {
		t.Errorf("archived message delivered again: %v", got)
	}
}

func TestCreateAndAgents(t *testing.T) {
	tr := newTree(t, "t2", "leader", "t1")
	tr.Perm = crew.SharedPerm
	if err := tr.Create("t3"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Create("t3"); err != nil {
		t.Errorf("Create again: %v", err)
	}
	for _, dir := range []string{tr.Dir("t3"), filepath.Join(tr.Dir("t3"), ArchiveDir)} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fi.Mode()&(fs.ModePerm|fs.ModeSetgid), crew.SharedPerm.Dir&(fs.ModePerm|fs.ModeSetgid); got != want {
			t.Errorf("%s mode = %v, want %v", dir, got, want)
		}
	}
	if err := tr.Create("T1"); !errors.Is(err, crew.ErrConflict) {
		t.Errorf("Create(T1) next to t1: error = %v, want ErrConflict", err)
	}
	for _, bad := range []string{"", "..", "a/b", "/abs", "a.b", strings.Repeat("x", 65)} {
		if err := tr.Create(bad); !errors.Is(err, crew.ErrInvalid) {
			t.Errorf("Create(%q): error = %v, want ErrInvalid", bad, err)
		}
		if tr.Exists(bad) {
			t.Errorf("Exists(%q) = true", bad)
		}
	}
	os.WriteFile(filepath.Join(tr.Root, "notes.txt"), nil, 0o600)
	os.Mkdir(filepath.Join(tr.Root, ".hidden"), 0o700)
	agents, err := tr.Agents()
	if want := []string{"leader", "t1", "t2", "t3"}; err != nil || !slices.Equal(agents, want) {
		t.Errorf("Agents = %v, %v; want %v", agents, err, want)
	}
	if !tr.Exists("t1") || tr.Exists("t9") {
		t.Error("Exists is wrong")
	}
	if agents, err := (Tree{Root: filepath.Join(t.TempDir(), "none")}).Agents(); err != nil || agents != nil {
		t.Errorf("Agents of a missing tree = %v, %v", agents, err)
	}
}

func TestListFixture(t *testing.T) {
	tr := fixtureTree(t)
	entries, errs, err := tr.List(fixtureAgent, false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	if want := []string{fixtureMayor, fixtureWitness}; !slices.Equal(names, want) {
		t.Errorf("List names = %v, want %v", names, want)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), fixtureTorn) || !errors.Is(errs[0], crew.ErrDamaged) {
		t.Errorf("List errors = %v, want one naming %s", errs, fixtureTorn)
	}
	for _, e := range errs {
		if strings.Contains(e.Error(), ".msg.tmp") {
			t.Errorf("the hidden temp file was read: %v", e)
		}
	}
	if len(entries) == 2 {
		mayor, witness := entries[0], entries[1]
		if mayor.Mail.Read || mayor.Mail.Type != "work_assignment" || mayor.Mail.From != "mayor-a1b2c" ||
			!mayor.Mail.Timestamp.Equal(time.Date(2026, 3, 5, 10, 30, 0, 0, time.UTC)) ||
			!strings.HasPrefix(mayor.Mail.Body, "Implement the auth middleware") {
			t.Errorf("mayor's message = %+v", mayor.Mail)
		}
		if !witness.Mail.Read || witness.Mail.Priority != "urgent" || witness.Mail.Subject != "Stall check" {
			t.Errorf("witness's message = %+v", witness.Mail)
		}
		if mayor.Mail.ID != strings.TrimSuffix(fixtureMayor, ".json") {
			t.Errorf("id of a message without one = %q, want its file name without .json", mayor.Mail.ID)
		}
		if mayor.Path != filepath.Join(tr.Dir(fixtureAgent), fixtureMayor) || mayor.Archived {
			t.Errorf("entry = %+v", mayor)
		}
	}

	entries, errs, err = tr.List(fixtureAgent, true)
	if err != nil || len(errs) != 1 || len(entries) != 3 {
		t.Fatalf("List with archive = %d entries, errors %v, %v", len(entries), errs, err)
	}
	if e := entries[0]; e.Name != fixtureArchived || !e.Archived || e.Mail.Subject != "Hello" {
		t.Errorf("first entry with archive = %+v, want the archived one", e)
	}

	// A symbolic link to a message is reported, not followed.
	secret := filepath.Join(t.TempDir(), "secret.json")
	os.WriteFile(secret, []byte(`{"from":"x","body":"secret"}`), 0o600)
	if err := os.Symlink(secret, filepath.Join(tr.Dir(fixtureAgent), "z-link.json")); err == nil {
		entries, errs, err = tr.List(fixtureAgent, false)
		if err != nil || len(entries) != 2 || len(errs) != 2 || !strings.Contains(errs[1].Error(), "z-link.json") {
			t.Errorf("List with a symlinked message = %d entries, errors %v, %v", len(entries), errs, err)
		}
	}

	if _, _, err := tr.List("nobody", false); !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("List(nobody): error = %v, want ErrNotFound", err)
	}
	if _, _, err := tr.List("../x", false); !errors.Is(err, crew.ErrInvalid) {
		t.Errorf("List(../x): error = %v, want ErrInvalid", err)
	}
}

func TestListOrderMixesNames(t *testing.T) {
	// A crew name with milliseconds sorts before the same second without
	// them ("." < "Z"); List still gives time order.
	tr := fixtureTree(t)
	m := testMail(t, time.Date(2026, 3, 5, 10, 30, 0, 500_000_000, time.UTC))
	m.To = fixtureAgent
	if _, err := tr.Deliver(fixtureAgent, m, false); err != nil {
		t.Fatal(err)
	}
	entries, _, err := tr.List(fixtureAgent, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 || entries[0].Name != fixtureMayor || entries[1].Mail.ID != m.ID {
		t.Errorf("List = %v, want mayor's, then the new one", entries)
	}
}

func TestFind(t *testing.T) {
	tr := fixtureTree(t)
	m := testMail(t, testTime)
	if _, err := tr.Deliver(fixtureAgent, m, false); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{
		m.ID:    Name(m),
		Name(m): Name(m),
		strings.TrimSuffix(fixtureMayor, ".json"): fixtureMayor,
		fixtureWitness: fixtureWitness,
		strings.TrimSuffix(fixtureArchived, ".json"): fixtureArchived,
		fixtureArchived: fixtureArchived, // a whole name is opened directly, in archive/ too
	} {
		e, err := tr.Find(fixtureAgent, id)
		if err != nil || e.Name != want {
			t.Errorf("Find(%s) = %s, %v; want %s", id, e.Name, err, want)
		}
	}
	if e, _ := tr.Find(fixtureAgent, strings.TrimSuffix(fixtureArchived, ".json")); !e.Archived {
		t.Error("archived entry not marked Archived")
	}
	if _, err := tr.Find(fixtureAgent, "nope"); !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("Find(nope): error = %v, want ErrNotFound", err)
	}
	// A file named like the id that is no message: its damage is the
	// answer, not "no such message".
	if _, err := tr.Find(fixtureAgent, strings.TrimSuffix(fixtureTorn, ".json")); !errors.Is(err, crew.ErrDamaged) || !strings.Contains(err.Error(), fixtureTorn) {
		t.Errorf("Find(torn file): error = %v, want ErrDamaged naming it", err)
	}
}

func TestSetRead(t *testing.T) {
	tr := fixtureTree(t)
	dir := tr.Dir(fixtureAgent)

	// A pretty-printed file of another tool: only the value changes.
	path := filepath.Join(dir, fixtureMayor)
	before, _ := os.ReadFile(path)
	id := strings.TrimSuffix(fixtureMayor, ".json")
	if err := tr.SetRead(fixtureAgent, id, true, true); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	if want := bytes.Replace(before, []byte(`"read": false`), []byte(`"read": true`), 1); !bytes.Equal(after, want) {
		t.Errorf("after SetRead:\n%s\nwant:\n%s", after, want)
	}
	if e, err := tr.Find(fixtureAgent, id); err != nil || !e.Mail.Read {
		t.Errorf("Find after SetRead = %+v, %v", e.Mail, err)
	}
	if err := tr.SetRead(fixtureAgent, id, false, false); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Errorf("after SetRead back:\n%s\nwant:\n%s", after, before)
	}

	// A crew file with extra keys keeps them; unchanged flag: no write.
	m := testMail(t, testTime)
	m.Extra = map[string]json.RawMessage{"zz": json.RawMessage(`{"read":false}`)}
	name, err := tr.Deliver(fixtureAgent, m, true)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, name)
	before, _ = os.ReadFile(path)
	fiBefore, _ := os.Stat(path)
	if err := tr.SetRead(fixtureAgent, m.ID, false, true); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); !os.SameFile(fi, fiBefore) {
		t.Error("SetRead to the same value rewrote the file")
	}
	if err := tr.SetRead(fixtureAgent, m.ID, true, true); err != nil {
		t.Fatal(err)
	}
	after, _ = os.ReadFile(path)
	// (A run message's copy: its flag set true is "true ", padReadFlag.)
	if want := bytes.Replace(before, []byte(`"read":false,"run"`), []byte(`"read":true ,"run"`), 1); !bytes.Equal(after, want) {
		t.Errorf("after SetRead:\n%s\nwant:\n%s", after, want)
	}
	got, err := Parse(after)
	m.Read = true
	if err != nil || !sameMail(got, m) {
		t.Errorf("Parse after SetRead = %+v, %v; want %+v", got, err, m)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after SetRead = %v", fi.Mode().Perm())
	}
	for _, f := range files(t, dir) {
		if strings.HasPrefix(f, tempPrefix) {
			t.Errorf("temp file left: %s", f)
		}
	}

	// An archived message.
	arch := strings.TrimSuffix(fixtureArchived, ".json")
	if err := tr.SetRead(fixtureAgent, arch, false, true); err != nil {
		t.Fatal(err)
	}
	if e, _ := tr.Find(fixtureAgent, arch); e.Mail.Read || !e.Archived {
		t.Errorf("archived entry after SetRead = %+v", e)
	}

	// A file without a "read" key gets one; its other keys are kept.
	noRead := []byte("{\"from\":\"x\",\"b\":[1, 2],\"timestamp\":\"2026-03-05T10:30:00Z\"}\n")
	if err := os.WriteFile(filepath.Join(dir, "n.json"), noRead, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tr.SetRead(fixtureAgent, "n", true, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "n.json")); string(got) != "{\"b\":[1,2],\"from\":\"x\",\"read\":true,\"timestamp\":\"2026-03-05T10:30:00Z\"}\n" {
		t.Errorf("after SetRead without a read key: %s", got)
	}

	if err := tr.SetRead(fixtureAgent, "nope", true, true); !errors.Is(err, crew.ErrNotFound) {
		t.Errorf("SetRead(nope): error = %v, want ErrNotFound", err)
	}
}
