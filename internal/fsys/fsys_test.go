package fsys

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/crew-dev/crew"
)

func TestFaultFailsChosenOperation(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	calls := 0
	restore := SetFault(func(op Op, path string) error {
		if op == OpSync {
			calls++
			return syscall.EIO
		}
		return nil
	})
	if _, err := WriteAt(f, []byte("hello\n"), 0); err != nil {
		t.Fatalf("write with a sync fault: %v", err)
	}
	if err := SyncFile(f); !errors.Is(err, syscall.EIO) || calls != 1 {
		t.Fatalf("sync: %v after %d calls, want EIO", err, calls)
	}
	restore()
	if err := SyncFile(f); err != nil {
		t.Fatalf("sync after restore: %v", err)
	}
}

func TestInjectedWriteIsShort(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	defer SetFault(func(Op, string) error { return syscall.ENOSPC })()
	n, err := WriteAt(f, []byte("0123456789"), 0)
	if !errors.Is(err, syscall.ENOSPC) || n != 5 {
		t.Fatalf("WriteAt = %d, %v; want a short write of 5 and ENOSPC", n, err)
	}
	if fi, _ := f.Stat(); fi.Size() != 5 {
		t.Fatalf("file holds %d bytes, want the 5 a full disk let through", fi.Size())
	}
}

func TestOpenNoFollow(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenNoFollow(link, os.O_RDWR|os.O_CREATE, 0o600); !errors.Is(err, ErrLink) || !errors.Is(err, crew.ErrTampered) {
		t.Fatalf("open through a link: %v, want ErrLink (crew.ErrTampered)", err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "created-through-link"), dangling); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenNoFollow(dangling, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
		t.Fatalf("opened a dangling link")
	}
	if _, err := os.Lstat(filepath.Join(dir, "created-through-link")); err == nil {
		t.Fatalf("a dangling link's target was created")
	}
	f, err := OpenNoFollow(filepath.Join(dir, "new"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatalf("create a new file: %v", err)
	}
	f.Close()
	if _, err := OpenNoFollow(filepath.Join(dir, "missing"), os.O_RDWR, 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open a missing file without O_CREATE: %v", err)
	}
	if _, err := OpenNoFollow(dir, os.O_RDWR, 0); !errors.Is(err, ErrLink) {
		t.Fatalf("open a directory: %v", err)
	}
}
