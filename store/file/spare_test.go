//go:build unix

package file

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/crew-dev/crew/internal/fsys"
)

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	check(t, err)
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no inode numbers on this system")
	}
	return uint64(st.Ino)
}

func rewrite(t *testing.T, path, content string) {
	t.Helper()
	check(t, rewriteKeepingInodes(path, 0o600, func(w io.Writer) error {
		_, err := io.WriteString(w, content)
		return err
	}))
}

// TestRewriteKeepingInodes: each rewrite replaces the content whole, the
// file keeps mode 0600, and after the first two no file is created or
// deleted: the name alternates between the same two inodes.
func TestRewriteKeepingInodes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.json")
	var inodes []uint64
	for i, content := range []string{"first, and long\n", "second\n", "third, the longest of them all\n", "4\n", "fifth\n"} {
		rewrite(t, path, content)
		data, err := os.ReadFile(path)
		check(t, err)
		if string(data) != content {
			t.Fatalf("rewrite %d: read %q, want %q", i+1, data, content)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("rewrite %d: mode %v, want 0600", i+1, fi.Mode().Perm())
		}
		inodes = append(inodes, inode(t, path))
	}
	for i := 2; i < len(inodes); i++ {
		if inodes[i] != inodes[i-2] {
			t.Fatalf("inodes of tasks.json over five rewrites %v: want two, taking turns", inodes)
		}
	}
	if inodes[0] == inodes[1] {
		t.Fatalf("inodes %v: the first two rewrites share one", inodes)
	}
	ents, err := os.ReadDir(dir)
	check(t, err)
	if len(ents) != 2 || ents[0].Name() != ".tasks.json.spare" || ents[1].Name() != "tasks.json" {
		t.Errorf("directory holds %v, want .tasks.json.spare and tasks.json", ents)
	}
}

// TestRewriteKeepingInodesMendsCrashes: what a crash between the steps
// leaves (a stale .old link, no spare) is mended by the next rewrite.
func TestRewriteKeepingInodesMendsCrashes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.json")
	old := filepath.Join(dir, ".tasks.json.old")
	rewrite(t, path, "one\n")
	rewrite(t, path, "two\n")
	// Killed after the link: .old names the current file too.
	check(t, os.Link(path, old))
	rewrite(t, path, "three\n")
	// Killed after the first rename: no spare, .old names the replaced file.
	check(t, os.Rename(filepath.Join(dir, ".tasks.json.spare"), old))
	rewrite(t, path, "four\n")
	data, err := os.ReadFile(path)
	check(t, err)
	if string(data) != "four\n" {
		t.Fatalf("tasks.json = %q, want four", data)
	}
	if _, err := os.Lstat(old); err == nil {
		t.Errorf("%s left behind", old)
	}
}

// TestRewriteKeepingInodesRefusesLinks: a spare that is a symbolic link
// is replaced, never written through, and so is a tasks.json that is one.
func TestRewriteKeepingInodesRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.json")
	victim := filepath.Join(t.TempDir(), "victim")
	check(t, os.WriteFile(victim, []byte("victim\n"), 0o600))
	check(t, os.Symlink(victim, filepath.Join(dir, ".tasks.json.spare")))
	rewrite(t, path, "one\n")
	check(t, os.Remove(path))
	check(t, os.Symlink(victim, path))
	rewrite(t, path, "two\n")
	rewrite(t, path, "three\n") // the spare is now the link that was tasks.json
	rewrite(t, path, "four\n")
	if data, _ := os.ReadFile(victim); string(data) != "victim\n" {
		t.Fatalf("written through a symbolic link: victim holds %q", data)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("tasks.json is not a regular file: %v %v", fi, err)
	}
}

// TestSealedSnapshotNeverTorn: a reader racing a rewriter (two sealed
// contents, each rewritten into the inode a reader may still hold) takes
// as whole only one whole content: a mix or a part fails openJSON.
func TestSealedSnapshotNeverTorn(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.json")
	// Of one length and one shape, so that the start of one and the end
	// of the other make valid JSON too: only the seal tells them apart.
	contents := [][]byte{
		sealJSON([]byte(`{"seq":1,"pad":"` + strings.Repeat("a", 20000) + `","status":"running"}`)),
		sealJSON([]byte(`{"seq":2,"pad":"` + strings.Repeat("b", 20000) + `","status":"waiting"}`)),
	}
	rewrite(t, path, string(contents[0]))
	done := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(done)
		for i := range 3000 {
			select {
			case <-stop:
				return
			default:
			}
			rewrite(t, path, string(contents[i%2]))
		}
	}()
	whole, torn := 0, 0
	for {
		select {
		case <-done:
			t.Logf("%d whole reads, %d torn", whole, torn)
			if whole == 0 {
				t.Fatal("no whole read")
			}
			return
		default:
		}
		data, err := os.ReadFile(path)
		check(t, err)
		obj, ok := openJSON(data)
		if !ok || !json.Valid(obj) {
			torn++
			continue
		}
		if s := sealJSON(bytes.Clone(obj)); !bytes.Equal(s, contents[0]) && !bytes.Equal(s, contents[1]) {
			t.Fatalf("openJSON took %d bytes as whole that are neither content: %.60q", len(data), data)
		}
		whole++
	}
}

// TestOpenJSON: a sealed object opens whole; cut short, changed, empty or
// unsealed (an older crew's, or edited by hand) it does not.
func TestOpenJSON(t *testing.T) {
	sealed := sealJSON([]byte(`{"seq":12,"tasks":{}}`))
	if !bytes.HasPrefix(sealed, []byte(`{"seq":12,"tasks":{},"crc32":"`)) || !bytes.HasSuffix(sealed, []byte(`"}`+"\n")) {
		t.Fatalf("sealJSON = %q", sealed)
	}
	if obj, ok := openJSON(bytes.Clone(sealed)); !ok || string(obj) != `{"seq":12,"tasks":{}}` { // (it cuts the seal off in place)
		t.Errorf("openJSON(sealed) = %s, %v", obj, ok)
	}
	changed := bytes.Replace(sealed, []byte("12"), []byte("13"), 1)
	// What a reader gets when the file it reads is truncated and
	// rewritten between its reads: the start of one, the end of another,
	// valid JSON either way.
	a := sealJSON([]byte(`{"seq":1,"pad":"aaaaaaaa","status":"running"}`))
	b := sealJSON([]byte(`{"seq":2,"pad":"bbbbbbbb","status":"waiting"}`))
	mixed := append(bytes.Clone(a[:20]), b[20:]...)
	if !json.Valid(bytes.TrimSpace(mixed)) {
		t.Fatalf("the mix is no JSON: %s", mixed)
	}
	for name, data := range map[string][]byte{"changed": changed, "mixed": mixed, "cut short": sealed[:len(sealed)-3], "empty": nil} {
		if obj, ok := openJSON(data); ok && json.Valid(obj) {
			t.Errorf("%s: openJSON(%q) took it as whole", name, data)
		}
	}
	if obj, ok := openJSON([]byte(`{"seq":12}` + "\n")); ok {
		t.Errorf("openJSON(unsealed) = %q, took it as whole", obj)
	}
}

// TestRewriteKeepingInodesNeverStuck: a spare with another name (a hard
// link from outside, as cp -al leaves) is not written through; a spare or
// .old that is a directory with files in it does not stop the rewrite.
func TestRewriteKeepingInodesNeverStuck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.json")
	rewrite(t, path, "one\n")
	rewrite(t, path, "one again\n") // now there is a spare
	outside := filepath.Join(t.TempDir(), "backup")
	check(t, os.WriteFile(outside, []byte("backup\n"), 0o644))
	check(t, os.Remove(filepath.Join(dir, ".tasks.json.spare")))
	check(t, os.Link(outside, filepath.Join(dir, ".tasks.json.spare")))
	rewrite(t, path, "two\n")
	rewrite(t, path, "three\n")
	rewrite(t, path, "four\n")
	if data, _ := os.ReadFile(outside); string(data) != "backup\n" {
		t.Fatalf("written through a hard link: the outside file holds %q", data)
	}
	if fi, _ := os.Stat(outside); fi.Mode().Perm() != 0o644 {
		t.Errorf("the outside file's mode was changed to %v", fi.Mode().Perm())
	}
	for _, name := range []string{".tasks.json.spare", ".tasks.json.old"} {
		check(t, os.RemoveAll(filepath.Join(dir, name)))
		check(t, os.MkdirAll(filepath.Join(dir, name, "sub"), 0o700))
		rewrite(t, path, "with a directory at "+name+"\n")
		if data, _ := os.ReadFile(path); string(data) != "with a directory at "+name+"\n" {
			t.Fatalf("with a directory at %s: tasks.json = %q", name, data)
		}
		check(t, os.RemoveAll(filepath.Join(dir, name)))
	}
}

// check fails the test on err.
func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A spare that cannot be rewritten (its truncate fails: LazyFS's
// lfs_truncate does so now and then) does not fail the rewrite: the
// file is replaced the way it is without a spare.
func TestRewriteKeepingInodesWithoutAWritableSpare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.json")
	fill := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	check(t, rewriteKeepingInodes(path, 0o600, fill("one")))
	check(t, rewriteKeepingInodes(path, 0o600, fill("two"))) // a spare exists now
	restore := fsys.SetFault(func(op fsys.Op, p string) error {
		if op == fsys.OpTruncate && strings.HasSuffix(p, ".spare") {
			return syscall.ENOENT
		}
		return nil
	})
	defer restore()
	if err := rewriteKeepingInodes(path, 0o600, fill("three")); err != nil {
		t.Fatalf("rewrite with a spare that cannot be truncated: %v", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "three" {
		t.Fatalf("tasks.json = %q, want three", data)
	}
}
