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
	"slices"
	"strings"
	"sync"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/fsys"
)

// An AgentDir is one agent's mail directory, held open so that many
// deliveries and read flags in a row pay once for opening it and checking
// that it is a real directory, not a symbolic link (the role of
// emersion/go-maildir's Dir). Tree.Deliver and Tree.SetRead open one for a
// single call; a projection that writes a batch of copies opens one per
// agent. Its methods are not safe for concurrent use; Close it.
type AgentDir struct {
	t     Tree
	agent string
	r     *os.Root    // every path operation stays inside the directory
	dir   *os.File    // the directory itself, for openat(2) (writeTemp)
	info  fs.FileInfo // dir's own fstat(2), for Moved
}

// OpenAgent implements Store: it opens agent's mail directory as an
// *AgentDir. It refuses an invalid id (crew.ErrInvalid), a missing
// mailbox (crew.ErrNotFound) and a directory that is a symbolic link.
func (t Tree) OpenAgent(agent string) (AgentBox, error) {
	d, err := t.openDir(agent, false)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return d, nil
}

// openDir is OpenAgent; forDelivery names --create-recipient in the
// message for a missing mailbox.
func (t Tree) openDir(agent string, forDelivery bool) (*AgentDir, error) {
	r, err := t.openAgent(agent, forDelivery)
	if err != nil {
		return nil, err
	}
	dir, err := r.Open(".")
	var info fs.FileInfo
	if err == nil {
		info, err = dir.Stat()
		if err != nil {
			dir.Close()
		}
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("open mailbox for agent %s: %w", agent, err)
	}
	return &AgentDir{t: t, agent: agent, r: r, dir: dir, info: info}, nil
}

// Moved reports whether d no longer is the agent's mail directory: the
// directory at its path is gone, or is another one (removed and created
// again, or replaced by a link) since d was opened. Copies delivered
// through d would then be lost to readers. It costs one lstat(2): a
// holder that let others write the tree meanwhile checks before it uses
// d again.
func (d *AgentDir) Moved() bool {
	fi, err := os.Lstat(d.t.Dir(d.agent))
	return err != nil || !os.SameFile(fi, d.info)
}

// Close closes the directory.
func (d *AgentDir) Close() error {
	return errors.Join(d.dir.Close(), d.r.Close())
}

// Agent returns the agent whose directory d is.
func (d *AgentDir) Agent() string { return d.agent }

// path returns the path of rel in the directory, for messages.
func (d *AgentDir) path(rel string) string { return filepath.Join(d.t.Dir(d.agent), rel) }

// Deliver is Tree.Deliver into d: it writes m as the file Name(m) and
// returns that name, with Tree.Deliver's rules and errors.
func (d *AgentDir) Deliver(m Mail, sync bool) (name string, err error) {
	return d.deliver(m, sync, false)
}

// DeliverNew is Deliver, without fsync (a projection's copy), of a
// message that cannot have been delivered to d before, such as a run
// message committed since the caller last looked: it does not look in
// archive/ for an earlier copy. A name already taken is still refused,
// never overwritten, unless it holds no JSON at all (a copy damaged by a
// power cut; see Tree.Deliver), which is replaced.
func (d *AgentDir) DeliverNew(m Mail) (name string, err error) {
	return d.deliver(m, false, true)
}

func (d *AgentDir) deliver(m Mail, sync, fresh bool) (name string, err error) {
	name, data, err := File(m)
	if err != nil {
		return "", fmt.Errorf("deliver to %s: %w", d.agent, err)
	}
	for range 3 {
		// Delivered before and archived since: delivering it again would
		// show an archived message as new.
		if !fresh && d.archiveIsDir() {
			archived := filepath.Join(ArchiveDir, name)
			c, err := d.lookCopy(archived, m.ID)
			switch {
			case err != nil:
				return "", fmt.Errorf("deliver to %s: %w", d.agent, err)
			case c.state == copySame:
				return name, syncExisting(d.r, archived, sync)
			case c.state == copyDamaged:
				err := d.replace(archived, data, c.info, sync)
				if errors.Is(err, errChanged) {
					continue
				}
				if err != nil {
					return "", fmt.Errorf("deliver to %s: replace %s: %w", d.agent, d.path(archived), err)
				}
				return name, nil
			}
		}
		err = d.create(name, data, sync)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("deliver to %s: %w", d.agent, err)
		}
		c, err := d.lookCopy(name, m.ID)
		switch {
		case err != nil:
			return "", fmt.Errorf("deliver to %s: %w", d.agent, err)
		case c.state == copySame:
			return name, syncExisting(d.r, name, sync)
		case c.state == copyGone: // archived or removed meanwhile: look again
			continue
		case c.state == copyDamaged:
			err := d.replace(name, data, c.info, sync)
			if errors.Is(err, errChanged) {
				continue
			}
			if err != nil {
				return "", fmt.Errorf("deliver to %s: replace %s: %w", d.agent, d.path(name), err)
			}
			return name, nil
		}
		return "", fmt.Errorf("deliver to %s: %s exists and holds another message: %w", d.agent, d.path(name), crew.ErrConflict)
	}
	return "", fmt.Errorf("deliver to %s: %s kept changing while it was delivered: %w", d.agent, d.path(name), crew.ErrConflict)
}

// copyState is what lookCopy found under a message's name.
type copyState int

const (
	copyGone    copyState = iota // no file of that name
	copySame                     // a whole file of the same message (same id)
	copyDamaged                  // a regular file that holds no JSON at all
	copyOther                    // anything else: another message, another tool's file, a link
)

// foundCopy is what lookCopy found, with the FileInfo of a damaged file
// (to replace it only if it is still the one read).
type foundCopy struct {
	state copyState
	info  fs.FileInfo
}

// lookCopy reports what the name rel (in d or its archive/) holds for the
// message id. A regular file whose bytes are not JSON at all (empty, cut
// short, zero-filled) is damaged: what a power cut leaves of a copy whose
// name reached the disk and whose data did not (link(2) and rename(2) are
// metadata, written at once; a projection's copy is never fsynced). The
// name carries the message's id (Name), so such a file can only be an
// earlier copy of the same message, and delivering it again replaces it.
// A whole JSON file is never replaced, whatever it holds.
func (d *AgentDir) lookCopy(rel, id string) (foundCopy, error) {
	fi, err := d.r.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return foundCopy{state: copyGone}, nil
	case err != nil:
		return foundCopy{}, err
	case !fi.Mode().IsRegular():
		return foundCopy{state: copyOther}, nil
	}
	data, info, err := readRegular(d.r, rel)
	if errors.Is(err, fs.ErrNotExist) {
		return foundCopy{state: copyGone}, nil
	}
	if err != nil {
		return foundCopy{}, err
	}
	if !json.Valid(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))) {
		return foundCopy{state: copyDamaged, info: info}, nil
	}
	if HoldsMessage(data, id) {
		return foundCopy{state: copySame}, nil
	}
	return foundCopy{state: copyOther}, nil
}

// archiveIsDir reports whether d's archive/ is a real directory (not a
// symbolic link): only then is a copy looked for, or replaced, in it.
func (d *AgentDir) archiveIsDir() bool {
	fi, err := d.r.Lstat(ArchiveDir)
	return err == nil && fi.IsDir()
}

// SetRead is Tree.SetRead in d: it sets the read flag of the message id
// (a message id or file name; see Tree.Find) to read, with Tree.SetRead's
// rules and errors.
func (d *AgentDir) SetRead(id string, read bool, sync bool) error {
	for range 3 {
		f, err := d.t.find(d.r, d.agent, id)
		if err != nil {
			return err
		}
		if f.Mail.Read == read {
			return nil
		}
		data, err := WithRead(f.data, read)
		if err != nil {
			return fmt.Errorf("mark %s: %w", f.Path, err)
		}
		err = d.replace(f.rel, data, f.info, sync)
		if errors.Is(err, errChanged) {
			continue
		}
		if err != nil {
			return fmt.Errorf("mark %s: %w", f.Path, err)
		}
		return nil
	}
	return fmt.Errorf("mark message %s of agent %s: the file kept changing while it was rewritten: %w", id, d.agent, crew.ErrConflict)
}

// errChanged is replace's report that the file it was to replace is no
// longer the one read.
var errChanged = errors.New("changed while it was rewritten")

// writeTemp creates the new file rel in d (never an existing one, never
// through a link), writes data, sets mode t.Perm.File exactly (whatever
// the umask) and fsync(2)s it if sync. On any error the file is removed.
func (d *AgentDir) writeTemp(rel string, data []byte, sync bool) error {
	if err := fsys.Check(fsys.OpCreate, d.path(rel)); err != nil {
		return err
	}
	perm := d.t.perm().File
	f, err := d.createExcl(rel, perm)
	if err != nil {
		return err
	}
	_, err = fsys.Write(f, data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && sync {
		err = fsys.SyncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		d.r.Remove(rel)
	}
	return err
}

// create gives data the new name name in d, whole or not at all, and
// never over an existing file (Maildir's delivery,
// https://cr.yp.to/proto/maildir.html): a hidden temp file, written (and
// fsync(2)ed if sync) and given mode t.Perm.File exactly, is link(2)ed to
// name and removed; with sync the directory is fsync(2)ed after. Without
// sync, where the system has unnamed temporary files (createUnnamed) the
// temp file has no name at all until it is linked. A name that is taken
// is an error wrapping fs.ErrExist. On any error nothing is left behind.
func (d *AgentDir) create(name string, data []byte, sync bool) error {
	if !sync {
		if done, err := d.createUnnamed(name, data); done {
			return err
		}
	}
	tmp := tempName(name)
	if err := d.writeTemp(tmp, data, sync); err != nil {
		return err
	}
	err := linkNew(d.r, tmp, name)
	d.r.Remove(tmp) // after a link, the final name keeps the file; after a rename fallback, tmp is gone already
	if err != nil {
		return err
	}
	if sync {
		if err := syncDir(d.r, "."); err != nil {
			d.r.Remove(name) // not durable, so not delivered: a failure leaves nothing (docs/guarantees.md, guarantee 5)
			return err
		}
	}
	return nil
}

// replace puts data in place of the file rel atomically: a hidden temp
// file beside it, written (fsync(2)ed if sync), renamed over rel, then the
// directory fsync(2)ed if sync. Readers see the old file or the new. If
// rel no longer holds the file described by was (Archive or another
// SetRead moved or replaced it), it writes nothing and returns errChanged.
func (d *AgentDir) replace(rel string, data []byte, was fs.FileInfo, sync bool) error {
	tmp := tempName(rel)
	if err := d.writeTemp(tmp, data, sync); err != nil {
		return err
	}
	if fi, err := d.r.Lstat(rel); err != nil || !os.SameFile(fi, was) {
		d.r.Remove(tmp)
		return errChanged
	}
	if err := fsys.Check(fsys.OpRename, d.path(rel)); err != nil {
		d.r.Remove(tmp)
		return err
	}
	if err := d.r.Rename(tmp, rel); err != nil {
		d.r.Remove(tmp)
		return err
	}
	if sync {
		return syncDir(d.r, filepath.Dir(rel))
	}
	return nil
}

// MarkCopyRead sets to true the read flag of the run message's copy named
// name in d, as a projection does when the message is delivered,
// acknowledged, rejected or answered (docs/mail-tree.md, Read flags): in
// place, one pwrite(2) of the five bytes "true " over "false" (a space
// after true keeps the file's length and its JSON valid), when the file
// has exactly one top-level boolean "read" key whose value lies within
// one 512-byte sector, so that a crash leaves the old value or the new
// and never a mix (a sector is written whole). Reading a hundred
// thousand copies so costs an open, a read and a write each, no new
// directory entry. A copy that is not where its name says (archived),
// not a plain regular file, or whose flag is laid out otherwise is set
// as SetRead sets it (a rewrite, renamed over it). A flag already true is
// not written.
func (d *AgentDir) MarkCopyRead(name string) error {
	if !strings.HasSuffix(name, ".json") || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return d.SetRead(name, true, false)
	}
	if fsys.Faulty() {
		if err := fsys.Check(fsys.OpWrite, d.path(name)); err != nil {
			return err
		}
	}
	f, err := d.openRW(name)
	if err != nil {
		return d.SetRead(name, true, false)
	}
	defer f.Close()
	size, regular, err := f.regularSize()
	if err != nil || !regular || size > inPlaceMax {
		return d.SetRead(name, true, false)
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	if int64(cap(*bp)) < size {
		*bp = make([]byte, size)
	}
	data := (*bp)[:size]
	if n, _ := f.ReadAt(data, 0); int64(n) != size {
		return d.SetRead(name, true, false)
	}
	start, end, ok := copyFlagRange(data)
	switch {
	case ok && string(data[start:end]) == "true":
		return nil
	case !ok || start/512 != (start+4)/512:
		return d.SetRead(name, true, false)
	}
	if _, err := f.WriteAt([]byte("true "), int64(start)); err != nil {
		return fmt.Errorf("mark %s: %w", d.path(name), err)
	}
	return nil
}

// padReadFlag returns data, a run message's copy, with a top-level read
// value true written as the five bytes "true " (a space after it), as
// MarkCopyRead sets it in place over "false": a copy delivered read, one
// set read in place and one set read by a rewrite are then the same
// bytes, as a rebuild of the projections finds them (crew repair).
// Other data is returned as it is.
func padReadFlag(data []byte) []byte {
	start, end, ok := copyFlagRange(data)
	if !ok || string(data[start:end]) != "true" || (end < len(data) && data[end] == ' ') {
		return data
	}
	return slices.Concat(data[:end], []byte(" "), data[end:])
}

// copyBufs are MarkCopyRead's read buffers.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// copyFlagRange is readFlagRange for the compact JSON a projection
// writes, without decoding it: the one `"read":` in the file (inside a
// string a quote is escaped, so the bytes `"read":` are a key) with no
// "{" before it (a top-level key). Any other file goes to readFlagRange.
// Only the bytes false right after that key are ever written over, so a
// file damaged elsewhere stays as damaged as it was.
func copyFlagRange(data []byte) (start, end int, ok bool) {
	key := []byte(`"read":`)
	if i := bytes.Index(data, key); i > 0 && data[0] == '{' && bytes.IndexByte(data[1:i], '{') < 0 && bytes.Count(data[i+1:], key) == 0 {
		start = i + len(key)
		for _, lit := range []string{"false", "true"} {
			if bytes.HasPrefix(data[start:], []byte(lit)) {
				return start, start + len(lit), true
			}
		}
	}
	return readFlagRange(data)
}

// markFile is the file MarkCopyRead reads and writes (openRW).
type markFile interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	regularSize() (size int64, regular bool, err error)
}

// inPlaceMax is the largest copy MarkCopyRead reads to set its flag in
// place (a run message's copy is at most its body limit and a few
// hundred bytes).
const inPlaceMax = 4 << 20
