package run

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/crew-dev/crew/internal/fsys"
)

// rewriteKeepingInodes replaces the file at path with what fill writes,
// as a rename over it does for readers that open it afterwards (they see
// the old file or the new one whole), but without creating a file or
// deleting one: the new content is written into a spare file kept beside
// it, ".<name>.spare", which then takes the name, and the replaced file
// becomes the spare for the next time:
//
//	write .<name>.spare    (truncated first; a hidden name readers never open)
//	link  <name> -> .<name>.old
//	rename .<name>.spare -> <name>
//	rename .<name>.old -> .<name>.spare
//
// Why: a projection rewritten on every commit would otherwise free an
// inode each time, and ext4 without a journal (this project's CI disks)
// does not reuse a freed inode for a minute or more, but walks past every
// one of them on each new file it creates (fs/ext4/ialloc.c,
// recently_deleted), so that creating a message's mail-tree copy grew
// from about 15 µs to over 100 µs under a steady rewrite.
//
// A crash at any step leaves the file whole (the old or the new), and at
// worst a stale .old or no spare, both mended by the next call; a spare
// it cannot use is replaced (openSpare), and where none can be made it
// writes a new file and renames it over, freeing an inode. A reader
// still holding the replaced file open when the spare is rewritten two
// calls later can see a mix of the two or a part of the new, so the
// content must tell whether it is whole (sealJSON, openJSON). The file
// is not fsynced: it is a projection.
func rewriteKeepingInodes(path string, perm os.FileMode, fill func(io.Writer) error) error {
	dir, name := filepath.Split(path)
	spare := filepath.Join(dir, "."+name+".spare")
	old := filepath.Join(dir, "."+name+".old")
	f, err := openSpare(spare, perm)
	if err != nil {
		// No spare this process can write (a directory took its name, or
		// the directory refuses a new file): a new file renamed over the
		// old one, as any atomic rewrite, frees an inode this time.
		return writeAtomicFunc(path, perm, false, fill)
	}
	err = fsys.TruncateFile(f, 0)
	if err == nil {
		w := bufio.NewWriterSize(fsysWriter{f}, 64<<10)
		if err = fill(w); err == nil {
			err = w.Flush()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// Keep the file being replaced (if any) as the next spare.
	err = os.Link(path, old)
	if errors.Is(err, fs.ErrExist) {
		os.Remove(old) // left by a crash between the link and the renames
		err = os.Link(path, old)
	}
	kept := err == nil // else (no file yet, a directory, a full directory) it is not kept
	if err := fsys.RenameFile(spare, path); err != nil {
		if kept {
			os.Remove(old)
		}
		return err
	}
	if kept {
		os.Rename(old, spare) // failing, .old is mended next time
	}
	return nil
}

// openSpare opens the spare file for rewriting, creating it if missing.
// It must be a regular file with no other name (a hard link elsewhere,
// a backup made with cp -al say, would be rewritten too) whose mode this
// process can set (its owner's: a shared-group run has writers of
// several users); anything else at its name is removed, never written
// through (SPEC §7.6), and a new spare made.
func openSpare(spare string, perm os.FileMode) (*os.File, error) {
	f, err := fsys.OpenNoFollow(spare, os.O_WRONLY|os.O_CREATE, perm)
	if err == nil {
		fi, err := f.Stat()
		if err == nil && fsys.Links(fi) == 1 && (fi.Mode().Perm() == perm.Perm() || f.Chmod(perm) == nil) {
			return f, nil
		}
		f.Close()
	}
	if err := os.Remove(spare); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	f, err = fsys.OpenFile(spare, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openSnapshot opens a snapshot file (tasks.json, open.jsonl) for
// reading. It must be a regular file: a symbolic link, a FIFO or a
// device (whose reading could block, or never end) is refused with an
// error wrapping fsys.ErrLink, and the snapshot is then rebuilt from the
// log like any unusable one.
func openSnapshot(path string) (*os.File, error) { return fsys.OpenNoFollow(path, os.O_RDONLY, 0) }

// readSnapshotFile reads the whole snapshot file at path (openSnapshot).
func readSnapshotFile(path string) ([]byte, error) {
	f, err := openSnapshot(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// sealJSON appends to the JSON object obj (compact, ending in '}') its
// CRC-32 (IEEE) as a last key, "crc32", and a newline:
//
//	{"seq":12,...,"crc32":"8f2a01c3"}
//
// A file rewritten in place (rewriteKeepingInodes) can be read while it
// is being rewritten, as a mix of the old and the new or a prefix of the
// new; the checksum tells a whole one from those (openJSON).
func sealJSON(obj []byte) []byte {
	sum := crc32.ChecksumIEEE(obj)
	return fmt.Appendf(obj[:len(obj)-1], `,"crc32":"%08x"}`+"\n", sum)
}

// openJSON returns the object sealJSON sealed, or ok=false if data is not
// such an object whole: read while it was rewritten, changed by hand, or
// written without a seal (by an older crew); a snapshot that is not whole
// is rebuilt from the log.
func openJSON(data []byte) (obj []byte, ok bool) {
	const n = len(`,"crc32":"00000000"}` + "\n")
	if len(data) < n || !bytes.HasPrefix(data[len(data)-n:], []byte(`,"crc32":"`)) {
		return nil, false
	}
	body := append(bytes.Clone(data[:len(data)-n]), '}')
	sum, err := strconv.ParseUint(string(data[len(data)-n+10:len(data)-3]), 16, 32)
	return body, err == nil && uint32(sum) == crc32.ChecksumIEEE(body)
}
