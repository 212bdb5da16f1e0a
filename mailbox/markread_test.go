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
