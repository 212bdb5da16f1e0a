//go:build unix

package fsys

import (
	"io/fs"
	"os"
	"syscall"
)

// openFile is os.OpenFile (close-on-exec, the mode subject to the umask)
// without its attempt to register the descriptor with the runtime's
// network poller, which for a regular file costs four fcntl(2) calls and
// an epoll_ctl(2) that fails: os.NewFile leaves a blocking descriptor
// alone (one fcntl(2), F_GETFL). Reads and writes of the file then block
// their thread, as they do for every regular file.
func openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := syscall.Open(name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}
