//go:build unix

package mailbox

import (
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// createExcl creates the new file rel in d for writing: O_CREAT|O_EXCL,
// and O_NOFOLLOW, so neither an existing file nor a link planted at rel
// is opened. A name in d itself is opened with openat(2) on d's directory
// and wrapped with os.NewFile, which leaves the file out of the runtime's
// poller: a mail file is written once, and registering it would cost more
// system calls than writing it. A name in a sub-directory goes through
// os.Root, which refuses links on the way.
func (d *AgentDir) createExcl(rel string, perm os.FileMode) (*os.File, error) {
	if strings.ContainsRune(rel, os.PathSeparator) {
		return d.r.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	}
	fd, err := unix.Openat(int(d.dir.Fd()), rel, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.path(rel), Err: err}
	}
	return os.NewFile(uintptr(fd), d.path(rel)), nil
}

// openRW opens the file name in d itself for reading and writing, never
// through a link (O_NOFOLLOW), as a bare descriptor: no *os.File, whose
// making costs a system call more than MarkCopyRead's write.
func (d *AgentDir) openRW(name string) (markFile, error) {
	fd, err := unix.Openat(int(d.dir.Fd()), name, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.path(name), Err: err}
	}
	return rawFile(fd), nil
}

// rawFile is a markFile over a bare descriptor.
type rawFile int

func (f rawFile) ReadAt(b []byte, off int64) (int, error)  { return unix.Pread(int(f), b, off) }
func (f rawFile) WriteAt(b []byte, off int64) (int, error) { return unix.Pwrite(int(f), b, off) }
func (f rawFile) Close() error                             { return unix.Close(int(f)) }
func (f rawFile) regularSize() (int64, bool, error) {
	var st unix.Stat_t
	err := unix.Fstat(int(f), &st)
	return st.Size, st.Mode&unix.S_IFMT == unix.S_IFREG, err
}
