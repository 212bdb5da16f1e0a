package mailbox

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/crew-dev/crew/internal/fsys"
)

// What createUnnamed has learnt the system refuses, so it asks once: an
// unnamed file (open(2) O_TMPFILE: not on every file system), or linking
// one by its descriptor (linkat(2) AT_EMPTY_PATH: Linux 6.10 and later,
// or CAP_DAC_READ_SEARCH) or through /proc/self/fd (no /proc).
var (
	noTmpfile   atomic.Bool
	noEmptyPath atomic.Bool
	noProcLink  atomic.Bool
)

// errNoLink is linkUnnamed's report that the system links unnamed files
// neither way.
var errNoLink = errors.New("cannot link an unnamed file")

// createUnnamed is create without a named temp file, for copies that are
// not fsynced: open(2) with O_TMPFILE makes a file in d that has no name,
// so nothing half-written can be seen and a killed writer leaves nothing
// behind; it is written, given mode t.Perm.File exactly, and linkat(2)ed
// to name, which never overwrites (EEXIST: an error wrapping
// fs.ErrExist). It saves a name's creation and removal in the directory
// per message. It reports false, having created nothing, where unnamed
// files cannot be made or linked; the caller then writes a named one.
func (d *AgentDir) createUnnamed(name string, data []byte) (bool, error) {
	if noTmpfile.Load() || (noEmptyPath.Load() && noProcLink.Load()) {
		return false, nil
	}
	path := d.path(name)
	if err := fsys.Check(fsys.OpCreate, path); err != nil {
		return true, err
	}
	perm := d.t.perm().File
	dir := int(d.dir.Fd())
	fd, err := unix.Openat(dir, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, uint32(perm.Perm()))
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) {
		noTmpfile.Store(true) // EISDIR: a kernel older than O_TMPFILE
		return false, nil
	}
	if err != nil {
		return true, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if _, err := fsys.Write(f, data); err != nil {
		return true, err
	}
	if err := f.Chmod(perm); err != nil {
		return true, err
	}
	if err := fsys.Check(fsys.OpLink, path); err != nil {
		return true, err
	}
	switch err := linkUnnamed(int(f.Fd()), dir, name); {
	case errors.Is(err, errNoLink):
		return false, nil
	case err != nil:
		return true, &os.LinkError{Op: "link", Old: "(unnamed file)", New: path, Err: err}
	}
	return true, nil
}

// linkUnnamed gives the unnamed file fd the name name in the directory
// dir: by its descriptor where the kernel allows it, else through
// /proc/self/fd (the way open(2) documents for O_TMPFILE). Either is
// refused with ENOENT or EPERM, when it is, and is not tried again.
func linkUnnamed(fd, dir int, name string) error {
	refused := func(err error) bool { return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPERM) }
	if !noEmptyPath.Load() {
		err := unix.Linkat(fd, "", dir, name, unix.AT_EMPTY_PATH)
		if !refused(err) {
			return err
		}
		noEmptyPath.Store(true)
	}
	if !noProcLink.Load() {
		err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dir, name, unix.AT_SYMLINK_FOLLOW)
		if !refused(err) {
			return err
		}
		noProcLink.Store(true)
	}
	return errNoLink
}
