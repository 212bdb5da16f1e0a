package mailbox

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/fsys"
)

// openBox makes a tree in a temporary directory with agent t1's mailbox,
// and opens it (closed when the test ends).
func openBox(t *testing.T, perm crew.Perm) (Tree, AgentBox) {
	t.Helper()
	tree := Tree{Root: filepath.Join(t.TempDir(), "mail"), Perm: perm}
	if err := tree.Create("t1"); err != nil {
		t.Fatal(err)
	}
	d, err := tree.OpenAgent("t1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return tree, d
}

// TestDeliverNewEveryWay: a projection's copy is delivered whole, mode
// 0600 (0660 shared), under its name and with nothing else left in the
// directory, whichever way the system lets it be written: an unnamed file
// linked by its descriptor, or through /proc/self/fd, or (no O_TMPFILE) a
// named temp file; and a name already taken is refused, never replaced.
func TestDeliverNewEveryWay(t *testing.T) {
	for _, c := range []struct {
		name string
		off  []*atomic.Bool
	}{
		{"unnamed, linked by descriptor", nil},
		{"unnamed, linked through /proc", []*atomic.Bool{&noEmptyPath}},
		{"named temp file", []*atomic.Bool{&noTmpfile}},
		{"named temp file, no way to link unnamed ones", []*atomic.Bool{&noEmptyPath, &noProcLink}},
	} {
		t.Run(c.name, func(t *testing.T) {
			saved := []bool{noTmpfile.Load(), noEmptyPath.Load(), noProcLink.Load()}
			defer func() { noTmpfile.Store(saved[0]); noEmptyPath.Store(saved[1]); noProcLink.Store(saved[2]) }()
			noTmpfile.Store(false)
			noEmptyPath.Store(false)
			noProcLink.Store(false)
			for _, b := range c.off {
				b.Store(true)
			}
			for _, perm := range []crew.Perm{crew.PrivatePerm, crew.SharedPerm} {
				tree, d := openBox(t, perm)
				m := testMail(t, time.Date(2026, 3, 5, 10, 30, 0, 123e6, time.UTC))
				name, err := d.DeliverNew(m)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := m.Marshal()
				got, err := os.ReadFile(filepath.Join(tree.Dir("t1"), name))
				if err != nil || string(got) != string(want) {
					t.Fatalf("copy %s = %q, %v; want %q", name, got, err, want)
				}
				if fi, _ := os.Stat(filepath.Join(tree.Dir("t1"), name)); fi.Mode().Perm() != perm.File {
					t.Errorf("copy mode %v, want %v", fi.Mode().Perm(), perm.File)
				}
				if c.off == nil && (noTmpfile.Load() || noEmptyPath.Load() && noProcLink.Load()) {
					t.Skip("this file system makes or links no unnamed files; the named way is tested below")
				}
				if fs := files(t, tree.Dir("t1")); len(fs) != 1 || fs[0] != name {
					t.Errorf("directory holds %v, want only %s", fs, name)
				}
				other := m
				other.ID = "01a23372-0000-7000-8000-000000000000"
				other.Body = "another message under the same name"
				if _, err := d.DeliverNew(m); err != nil {
					t.Errorf("DeliverNew of the same message again: %v, want nil (the copy is there)", err)
				}
				m.ID, m.Body = other.ID, other.Body
				taken := Name(m)
				if err := os.Rename(filepath.Join(tree.Dir("t1"), name), filepath.Join(tree.Dir("t1"), taken)); err != nil {
					t.Fatal(err)
				}
				if _, err := d.DeliverNew(m); !errors.Is(err, crew.ErrConflict) {
					t.Errorf("DeliverNew over another message's file: %v, want ErrConflict", err)
				}
				if got2, _ := os.ReadFile(filepath.Join(tree.Dir("t1"), taken)); string(got2) != string(want) {
					t.Errorf("the file under the taken name was replaced: %q", got2)
				}
				if fs := files(t, tree.Dir("t1")); len(fs) != 1 || fs[0] != taken {
					t.Errorf("after the refusal the directory holds %v, want only %s", fs, taken)
				}
			}
		})
	}
}

// TestDeliverNewFaults: a failing create, write or link leaves nothing in
// the directory, on the unnamed path too.
func TestDeliverNewFaults(t *testing.T) {
	for _, op := range []fsys.Op{fsys.OpCreate, fsys.OpWrite, fsys.OpLink} {
		t.Run(string(op), func(t *testing.T) {
			tree, d := openBox(t, crew.PrivatePerm)
			restore := fsys.SetFault(func(o fsys.Op, _ string) error {
				if o == op {
					return syscall.ENOSPC
				}
				return nil
			})
			_, err := d.DeliverNew(testMail(t, time.Now()))
			restore()
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("DeliverNew with a failing %s: %v, want ENOSPC", op, err)
			}
			if fs := files(t, tree.Dir("t1")); len(fs) != 0 {
				t.Errorf("after a failing %s the directory holds %v", op, fs)
			}
		})
	}
}
