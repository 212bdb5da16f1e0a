package mailbox

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crew-dev/crew"
)

func TestArchive(t *testing.T) {
	tr := newTree(t, "bob")
	now := testTime.Add(48 * time.Hour)
	deliver := func(age time.Duration, read bool) string {
		m := testMail(t, now.Add(-age))
		m.Read = read
		name, err := tr.Deliver("bob", m, false)
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	oldRead := deliver(30*time.Hour, true)
	oldUnread := deliver(26*time.Hour, false)
	newRead := deliver(time.Hour, true)
	newUnread := deliver(time.Minute, false)
	arch := filepath.Join(tr.Dir("bob"), ArchiveDir)

	moved, err := tr.Archive("bob", 24*time.Hour, false, now)
	if err != nil || !slices.Equal(moved, []string{oldRead}) {
		t.Errorf("Archive = %v, %v; want [%s]", moved, err, oldRead)
	}
	if got := files(t, arch); !slices.Equal(got, []string{oldRead}) {
		t.Errorf("archive/ = %v", got)
	}
	moved, err = tr.Archive("bob", 24*time.Hour, true, now)
	if err != nil || !slices.Equal(moved, []string{oldUnread}) {
		t.Errorf("Archive unread = %v, %v; want [%s]", moved, err, oldUnread)
	}
	if got := files(t, tr.Dir("bob")); !slices.Equal(got, []string{newRead, newUnread}) {
		t.Errorf("left = %v", got)
	}
	e, err := tr.Find("bob", strings.TrimSuffix(oldUnread, ".json"))
	if err != nil || !e.Archived || e.Mail.Read {
		t.Errorf("archived unread = %+v, %v", e, err)
	}

	// An archive file of the same name is never overwritten.
	occupied := []byte(`{"from":"someone","read":true}` + "\n")
	if err := os.WriteFile(filepath.Join(arch, newRead), occupied, 0o600); err != nil {
		t.Fatal(err)
	}
	moved, err = tr.Archive("bob", 0, false, now)
	if !errors.Is(err, crew.ErrConflict) || len(moved) != 0 {
		t.Errorf("Archive onto an existing file = %v, %v; want ErrConflict", moved, err)
	}
	if got, _ := os.ReadFile(filepath.Join(arch, newRead)); !bytes.Equal(got, occupied) {
		t.Error("Archive overwrote an archived file")
	}
	if _, err := os.Stat(filepath.Join(tr.Dir("bob"), newRead)); err != nil {
		t.Errorf("the message not archived is gone: %v", err)
	}

	// A move cut short by a crash (linked, not yet unlinked) is completed.
	os.Remove(filepath.Join(arch, newRead))
	if err := os.Link(filepath.Join(tr.Dir("bob"), newRead), filepath.Join(arch, newRead)); err != nil {
		t.Fatal(err)
	}
	moved, err = tr.Archive("bob", 0, false, now)
	if err != nil || !slices.Equal(moved, []string{newRead}) {
		t.Errorf("Archive after a crash = %v, %v", moved, err)
	}
	if got := files(t, tr.Dir("bob")); !slices.Equal(got, []string{newUnread}) {
		t.Errorf("left = %v", got)
	}
}

func TestArchiveFixture(t *testing.T) {
	tr := fixtureTree(t)
	// The torn file stays; the read one goes; the unread one stays.
	moved, err := tr.Archive(fixtureAgent, time.Hour, false, time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC))
	if err != nil || !slices.Equal(moved, []string{fixtureWitness}) {
		t.Errorf("Archive = %v, %v", moved, err)
	}
	if got, want := files(t, tr.Dir(fixtureAgent)), []string{".msg.tmp", fixtureMayor, fixtureTorn}; !slices.Equal(got, want) {
		t.Errorf("left = %v, want %v", got, want)
	}
}

// TestArchiveRemovesStaleTemps: temp files of deliveries killed long ago
// (older than Maildir's 36 hours) are removed by Archive; younger ones,
// which may belong to a delivery in progress, and messages stay.
func TestArchiveRemovesStaleTemps(t *testing.T) {
	tr := newTree(t, "bob")
	now := time.Now()
	name, err := tr.Deliver("bob", testMail(t, now), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		age  time.Duration
	}{{tempPrefix + "old", 40 * time.Hour}, {tempPrefix + "young", time.Hour}, {filepath.Join(ArchiveDir, tempPrefix+"old"), 37 * time.Hour}} {
		p := filepath.Join(tr.Dir("bob"), c.name)
		if err := os.WriteFile(p, []byte(`{"body":"half`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-c.age), now.Add(-c.age)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tr.Archive("bob", 24*time.Hour, false, now); err != nil {
		t.Fatal(err)
	}
	if got := files(t, tr.Dir("bob")); !slices.Equal(got, []string{tempPrefix + "young", name}) {
		t.Errorf("after Archive the mailbox holds %v, want the young temp file and the message", got)
	}
	if got := files(t, filepath.Join(tr.Dir("bob"), ArchiveDir)); len(got) != 0 {
		t.Errorf("after Archive archive/ holds %v, want nothing", got)
	}
}
