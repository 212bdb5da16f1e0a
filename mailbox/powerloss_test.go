package mailbox

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/crew-dev/crew"
)

// damagedCopies are what a power cut leaves under a copy's final name when
// the name reached the disk and the data did not, or only a part of it:
// link(2) and rename(2) are metadata, written at once on most file
// systems, while a projection's copy is never fsynced (LazyFS shows it:
// an empty file; ext4 with delayed allocation: an empty file or zeros).
func damagedCopies(data []byte) map[string][]byte {
	return map[string][]byte{
		"an empty":        nil,
		"a torn":          data[:len(data)/2],
		"a zero-filled":   make([]byte, len(data)),
		"an unterminated": data[:len(data)-2],
	}
}

// TestDeliverReplacesDamagedCopy: a file under a message's own name that
// holds no whole message (a copy whose data a power cut lost) is replaced
// by the message when it is delivered again, by Deliver (with and without
// sync: a repair, a projection catching up) and by DeliverNew, and List
// then reads it. Before, Deliver refused it as "exists and holds another
// message" (crew.ErrConflict), so crew repair could never finish and
// crew mail check kept exiting 7.
func TestDeliverReplacesDamagedCopy(t *testing.T) {
	for _, how := range []string{"Deliver", "Deliver sync", "DeliverNew"} {
		m := testMail(t, testTime)
		data, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		for what, bad := range damagedCopies(data) {
			tree, d := openBox(t, crew.PrivatePerm)
			path := filepath.Join(tree.Dir("t1"), Name(m))
			if err := os.WriteFile(path, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			var name string
			switch how {
			case "Deliver":
				name, err = d.Deliver(m, false)
			case "Deliver sync":
				name, err = tree.Deliver("t1", m, true)
			case "DeliverNew":
				name, err = d.DeliverNew(m)
			}
			if err != nil || name != Name(m) {
				t.Errorf("%s over %s copy = %q, %v; want %s, nil", how, what, name, err, Name(m))
				continue
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
				t.Errorf("%s over %s copy left %q, want %q", how, what, got, data)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s over %s copy: mode %v, %v; want 0600", how, what, fi.Mode().Perm(), err)
			}
			entries, errs, err := tree.List("t1", true)
			if err != nil || len(errs) > 0 || len(entries) != 1 || entries[0].Mail.ID != m.ID {
				t.Errorf("%s over %s copy: List = %v, %v, %v; want the message alone", how, what, entries, errs, err)
			}
			if got := files(t, tree.Dir("t1")); !slices.Equal(got, []string{Name(m)}) {
				t.Errorf("%s over %s copy: files %v, want the copy alone (no temp file)", how, what, got)
			}
		}
	}
}

// TestDeliverReplacesDamagedArchivedCopy: an archived copy whose data a
// power cut lost is replaced where it is (the message stays archived),
// not delivered a second time as new.
func TestDeliverReplacesDamagedArchivedCopy(t *testing.T) {
	tree, d := openBox(t, crew.PrivatePerm)
	m := testMail(t, testTime)
	m.Read = true
	_, data, _ := File(m) // a run message's copy, read: "true " (padReadFlag)
	path := filepath.Join(tree.Dir("t1"), ArchiveDir, Name(m))
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if name, err := d.Deliver(m, false); err != nil || name != Name(m) {
		t.Fatalf("Deliver over an empty archived copy = %q, %v", name, err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Errorf("archived copy after Deliver = %q, want %q", got, data)
	}
	if got := files(t, tree.Dir("t1")); len(got) != 0 {
		t.Errorf("an archived message was delivered again as new: %v", got)
	}
}

// TestDeliverKeepsAnotherMessage: what a damaged copy's replacement must
// never touch. A whole file of another message under the name, a file of
// another tool without an id, and a symbolic link are refused
// (crew.ErrConflict) and left byte for byte.
func TestDeliverKeepsAnotherMessage(t *testing.T) {
	m := testMail(t, testTime)
	other := m
	other.ID = "someone-else"
	otherData, _ := other.Marshal()
	noID := m
	noID.ID = ""
	noIDData, _ := noID.Marshal()
	for what, data := range map[string][]byte{"another message": otherData, "a file without an id": noIDData} {
		tree, d := openBox(t, crew.PrivatePerm)
		path := filepath.Join(tree.Dir("t1"), Name(m))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, deliver := range []func() (string, error){
			func() (string, error) { return d.Deliver(m, false) },
			func() (string, error) { return d.DeliverNew(m) },
			func() (string, error) { return tree.Deliver("t1", m, true) },
		} {
			if _, err := deliver(); !errors.Is(err, crew.ErrConflict) {
				t.Errorf("delivery over %s: error %v, want ErrConflict", what, err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
				t.Errorf("delivery over %s changed it to %q", what, got)
			}
		}
	}

	tree, d := openBox(t, crew.PrivatePerm)
	target := filepath.Join(tree.Dir("t1"), "target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target", filepath.Join(tree.Dir("t1"), Name(m))); err != nil {
		t.Skip("no symbolic links:", err)
	}
	if _, err := d.Deliver(m, false); !errors.Is(err, crew.ErrConflict) {
		t.Errorf("delivery over a symbolic link to an empty file: error %v, want ErrConflict", err)
	}
	if fi, err := os.Lstat(filepath.Join(tree.Dir("t1"), Name(m))); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symbolic link was replaced: %v, %v", fi, err)
	}
	if got, _ := os.ReadFile(target); len(got) != 0 {
		t.Errorf("written through a symbolic link: %q", got)
	}
}

// TestSetReadAfterDamagedCopyReplaced: the order a projection uses (copy,
// then read flag) works on a damaged copy.
func TestSetReadAfterDamagedCopyReplaced(t *testing.T) {
	tree, d := openBox(t, crew.PrivatePerm)
	m := testMail(t, time.Now())
	if err := os.WriteFile(filepath.Join(tree.Dir("t1"), Name(m)), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Deliver(m, false); err != nil {
		t.Fatal(err)
	}
	if err := d.SetRead(Name(m), true, false); err != nil {
		t.Fatal(err)
	}
	if e, err := tree.Find("t1", m.ID); err != nil || !e.Mail.Read {
		t.Errorf("Find after SetRead = %+v, %v; want read", e, err)
	}
}
