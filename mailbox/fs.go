// The file-system steps of the tree, each within one agent's directory
// (an os.Root, so no name or link leads out of it): temp file names, making
// a directory, a link that never replaces, fsync(2) of a directory or of a
// file delivered before, and reading a regular file.

package mailbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/google/uuid"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/fsys"
)

// tempPrefix starts the name of every temporary file Deliver and
// SetRead write. It starts with a dot, so readers skip it (Maildir's rule
// for tmp/, https://cr.yp.to/proto/maildir.html, in one directory).
const tempPrefix = ".tmp-"

// tempName returns a new name for a temporary file in the directory of
// rel: hidden, so readers skip it.
func tempName(rel string) string {
	return filepath.Join(filepath.Dir(rel), tempPrefix+uuid.NewString())
}

// mkdirIn makes directory name in r with mode perm (set exactly), unless
// a real directory of that name exists. A symbolic link is refused.
func mkdirIn(r *os.Root, name string, perm os.FileMode) error {
	err := r.Mkdir(name, perm&fs.ModePerm) // os.Root refuses setgid here; Chmod sets it
	if err == nil {
		return r.Chmod(name, perm)
	}
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := r.Lstat(name)
	switch {
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link; crew does not write through links: %w", filepath.Join(r.Name(), name), crew.ErrTampered)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory: %w", filepath.Join(r.Name(), name), crew.ErrTampered)
	}
	return nil
}

// syncExisting makes an already delivered file durable if sync: it may
// have been written by a delivery that did not fsync.
func syncExisting(r *os.Root, rel string, sync bool) error {
	if !sync {
		return nil
	}
	f, err := r.Open(rel)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(r, filepath.Dir(rel))
	}
	return err
}

// linkNew gives the file oldname the name newname without ever replacing
// an existing newname: link(2), whose EEXIST comes back as an error
// wrapping fs.ErrExist. Where hard links fail for another reason (file
// systems without them), it renames after checking that newname is free;
// that leaves a window in which a file created by someone else at the same
// moment could be replaced.
func linkNew(r *os.Root, oldname, newname string) error {
	if err := fsys.Check(fsys.OpLink, filepath.Join(r.Name(), newname)); err != nil {
		return err
	}
	err := r.Link(oldname, newname)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	if _, lerr := r.Lstat(newname); lerr == nil {
		return &fs.PathError{Op: "link", Path: newname, Err: fs.ErrExist}
	}
	if rerr := r.Rename(oldname, newname); rerr != nil {
		return err
	}
	return nil
}

// syncDir fsync(2)s the directory rel of r, which makes the names
// created, renamed or removed in it durable. Windows cannot sync a
// directory (and needs not).
func syncDir(r *os.Root, rel string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := r.Open(rel)
	if err != nil {
		return err
	}
	err = fsys.SyncFile(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// readRegular reads the regular file rel of r and returns its bytes and
// the FileInfo of the file read.
func readRegular(r *os.Root, rel string) ([]byte, fs.FileInfo, error) {
	f, err := r.Open(rel)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	data, err := io.ReadAll(f)
	if err == nil && len(data) > 0 && !json.Valid(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))) {
		// Read at the instant a projection set the read flag in place
		// (AgentDir.MarkCopyRead), the five bytes may be seen half
		// written where reads and writes of a file are not serialised
		// (ext4): read once more.
		again := make([]byte, len(data))
		if n, rerr := f.ReadAt(again, 0); n == len(data) && (rerr == nil || rerr == io.EOF) {
			data = again
		}
	}
	return data, fi, err
}
