package fsys

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"

	"github.com/gofrs/flock"

	"github.com/crew-dev/crew"
)

// Op names a kind of file operation a Fault can fail.
type Op string

// The operations that go through the seam.
const (
	OpCreate   Op = "create"   // open(2) with O_CREATE, mkdir(2), a temporary file
	OpWrite    Op = "write"    // write(2)
	OpSync     Op = "sync"     // fsync(2) of a file or a directory
	OpTruncate Op = "truncate" // ftruncate(2)
	OpRename   Op = "rename"   // rename(2)
	OpLink     Op = "link"     // link(2)
)

// A Fault decides whether an operation on path fails: it returns the error
// to report (typically syscall.ENOSPC or syscall.EIO) or nil to let the
// operation happen.
type Fault func(op Op, path string) error

var fault atomic.Pointer[Fault]

// SetFault installs f for every later operation (nil removes it) and
// returns a function that puts back the one installed before. It is meant
// for tests; the fault is process-wide.
func SetFault(f Fault) (restore func()) {
	var p *Fault
	if f != nil {
		p = &f
	}
	old := fault.Swap(p)
	return func() { fault.Store(old) }
}

// Faulty reports whether a Fault is installed: a caller may skip
// building the path it would give Check when none is.
func Faulty() bool { return fault.Load() != nil }

// Check returns the error the installed Fault chooses for op on path,
// wrapped in an *fs.PathError like the os package's own errors, or nil.
// Callers that do an operation this package does not wrap (a method of
// os.Root, say) call Check first and stop on its error.
func Check(op Op, path string) error {
	p := fault.Load()
	if p == nil {
		return nil
	}
	if err := (*p)(op, path); err != nil {
		return &fs.PathError{Op: string(op), Path: path, Err: err}
	}
	return nil
}

// WriteAt is f.WriteAt(b, off). An injected write failure first writes the
// first half of b, as a disk that fills up mid-write does, so callers'
// rollback is exercised too.
func WriteAt(f *os.File, b []byte, off int64) (int, error) {
	if err := Check(OpWrite, f.Name()); err != nil {
		n, _ := f.WriteAt(b[:len(b)/2], off)
		return n, err
	}
	return f.WriteAt(b, off)
}

// Write is f.Write(b), with WriteAt's injected short write.
func Write(f *os.File, b []byte) (int, error) {
	if err := Check(OpWrite, f.Name()); err != nil {
		n, _ := f.Write(b[:len(b)/2])
		return n, err
	}
	return f.Write(b)
}

// SyncFile is f.Sync(): fsync(2) of a file or an open directory.
func SyncFile(f *os.File) error {
	if err := Check(OpSync, f.Name()); err != nil {
		return err
	}
	return f.Sync()
}

// TruncateFile is f.Truncate(size).
func TruncateFile(f *os.File, size int64) error {
	if err := Check(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.Truncate(size)
}

// RenameFile is os.Rename(oldpath, newpath); the Fault sees newpath.
func RenameFile(oldpath, newpath string) error {
	if err := Check(OpRename, newpath); err != nil {
		return err
	}
	return os.Rename(oldpath, newpath)
}

// OpenFile is os.OpenFile for a regular file (with fewer system calls,
// see openFile); with os.O_CREATE in flag it is a Create.
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	if flag&os.O_CREATE != 0 {
		if err := Check(OpCreate, name); err != nil {
			return nil, err
		}
	}
	return openFile(name, flag, perm)
}

// CreateTemp is os.CreateTemp(dir, pattern); the Fault sees dir joined
// with pattern.
func CreateTemp(dir, pattern string) (*os.File, error) {
	if err := Check(OpCreate, dir+string(os.PathSeparator)+pattern); err != nil {
		return nil, err
	}
	return os.CreateTemp(dir, pattern)
}

// Mkdir is os.Mkdir, a Create.
func Mkdir(name string, perm os.FileMode) error {
	if err := Check(OpCreate, name); err != nil {
		return err
	}
	return os.Mkdir(name, perm)
}

// ErrLink is returned (wrapped) by OpenNoFollow for a path that is a
// symbolic link or not a regular file. It wraps crew.ErrTampered, as
// crew's other refusals of links do.
var ErrLink = fmt.Errorf("not a regular file; crew does not read or write through symbolic links: %w", crew.ErrTampered)

// OpenNoFollow opens the regular file at path (flag holds os.O_RDONLY,
// os.O_RDWR or os.O_WRONLY, and maybe os.O_CREATE) without following a
// symbolic link: a link, or anything but a regular file (a FIFO, whose
// open would block, or a device), is refused with an error wrapping
// ErrLink, and so is a file swapped for another between the check and the
// open. With os.O_CREATE a missing file is created
// exclusively (O_EXCL), so a link planted meanwhile is not followed either
// (docs/files.md, Permissions).
func OpenNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && flag&os.O_CREATE != 0:
		return OpenFile(path, flag|os.O_EXCL, perm)
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s: %w", path, ErrLink)
	}
	f, err := openFile(path, flag&^os.O_CREATE, perm)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !os.SameFile(fi, st) {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, ErrLink)
	}
	return f, nil
}

// LockFile takes the exclusive lock on the lock file at path
// (github.com/gofrs/flock: flock(2)), creating the file with mode perm
// (set exactly, whatever the umask) if missing, and returns the function
// that lets it go.
// A path that is a symbolic link, or not a regular file, is refused with
// an error wrapping ErrLink: flock opens it with O_CREATE, which would
// follow a link.
func LockFile(path string, perm os.FileMode) (unlock func(), err error) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("lock %s: %w", path, ErrLink)
	}
	fl := flock.New(path, flock.SetPermissions(perm))
	if err := fl.Lock(); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() != perm.Perm() {
		os.Chmod(path, perm) // the umask's part undone; another user's file keeps its mode
	}
	return func() { fl.Unlock() }, nil
}
