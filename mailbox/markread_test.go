package mailbox

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// A projection marks a run message's copy read in place: the same file
// (no rewrite renamed over it, no new directory entry), its JSON valid,
// read true, every other byte as it was; marking it again writes nothing.
func TestMarkCopyReadInPlace(t *testing.T) {
	tr := newTree(t, "bob")
	box, err := tr.OpenAgent("bob")
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	d := box.(*AgentDir)
	m := testMail(t, testTime)
	name, err := d.DeliverNew(m)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(tr.Root, "bob", name)
	before, _ := os.ReadFile(path)
	fi, _ := os.Stat(path)
	if err := d.MarkCopyRead(name); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	fi2, _ := os.Stat(path)
	if !os.SameFile(fi, fi2) {
		t.Errorf("the copy was replaced by another file; want its flag set in place")
	}
	var got map[string]any
	if err := json.Unmarshal(after, &got); err != nil || got["read"] != true {
		t.Fatalf("after MarkCopyRead: %s (%v); want valid JSON with read true", after, err)
	}
	if len(after) != len(before) || !bytes.Equal(bytes.Replace(before, []byte(`"read":false`), []byte(`"read":true `), 1), after) {
		t.Errorf("bytes changed beyond the flag:\n%s\n%s", before, after)
	}
	if err := d.MarkCopyRead(name); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, after) {
		t.Errorf("marked twice: %s", again)
	}
	list, bad, err := tr.List("bob", false)
	if err != nil || len(bad) > 0 || len(list) != 1 || !list[0].Mail.Read {
		t.Errorf("List after MarkCopyRead: %+v, %v, %v; want one read message", list, bad, err)
	}
}

// A run message's copy delivered read is the same bytes as one delivered
// unread and then marked read in place, and as one marked read by a
// rewrite: a rebuild of the projections (crew repair) finds every copy
// as it was, however its flag was set.
func TestRunCopyReadIsOneEncoding(t *testing.T) {
	tr := newTree(t, "bob", "ann", "cat")
	m := testMail(t, testTime)
	read := m
	read.Read = true
	var got [3][]byte
	for i, agent := range []string{"bob", "ann", "cat"} {
		box, err := tr.OpenAgent(agent)
		if err != nil {
			t.Fatal(err)
		}
		d := box.(*AgentDir)
		var name string
		if i == 0 {
			name, err = d.DeliverNew(read)
		} else {
			name, err = d.DeliverNew(m)
		}
		if err != nil {
			t.Fatal(err)
		}
		switch i {
		case 1:
			err = d.MarkCopyRead(name)
		case 2:
			err = d.SetRead(name, true, false) // MarkCopyRead's way when in place cannot be
		}
		if err != nil {
			t.Fatal(err)
		}
		box.Close()
		got[i], _ = os.ReadFile(filepath.Join(tr.Root, agent, name))
		got[i] = bytes.Replace(got[i], []byte(`"to":"`+agent+`"`), []byte(`"to":"x"`), 1)
	}
	if !bytes.Equal(got[0], got[1]) || !bytes.Equal(got[0], got[2]) {
		t.Errorf("a read copy differs by how its flag was set:\ndelivered read %s\nmarked in place %s\nrewritten %s", got[0], got[1], got[2])
	}
}
