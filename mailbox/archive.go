// The archive: old messages moved into an agent's archive/ by link(2)
// and unlink(2), never overwriting, and killed deliveries' temp files
// removed (docs/mail-tree.md, Archive).

package mailbox

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crew-dev/crew"
)

// ArchiveDir is the name of the sub-directory of an agent's mail directory
// that Archive moves old messages into.
const ArchiveDir = "archive"

// Archivable reports whether Archive moves m, every Store's: m was sent
// before cutoff (the time of the archive less its olderThan), and it is
// read or includeUnread (docs/mail-tree.md, Archive: nothing disappears
// unseen).
func (m Mail) Archivable(cutoff time.Time, includeUnread bool) bool {
	return m.Timestamp.Before(cutoff) && (m.Read || includeUnread)
}

// staleTemp is how old a temp file of Deliver or SetRead must be for
// Archive to remove it: Maildir's rule for tmp/ (36 hours,
// https://cr.yp.to/proto/maildir.html), since a delivery that old was
// killed and will never finish.
const staleTemp = 36 * time.Hour

// removeStaleTemps removes the temp files (tempPrefix) older than
// staleTemp from the mail directory r and its archive/, and reports how
// many it removed.
func removeStaleTemps(r *os.Root, now time.Time) int {
	n := 0
	for _, dir := range []string{".", ArchiveDir} {
		d, err := r.Open(dir)
		if err != nil {
			continue
		}
		des, _ := d.ReadDir(-1)
		d.Close()
		for _, de := range des {
			if !strings.HasPrefix(de.Name(), tempPrefix) || !de.Type().IsRegular() {
				continue
			}
			if fi, err := de.Info(); err == nil && now.Sub(fi.ModTime()) > staleTemp && r.Remove(filepath.Join(dir, de.Name())) == nil {
				n++
			}
		}
	}
	return n
}

// Archive moves agent's messages older than olderThan (Timestamp before
// now minus olderThan) from the mail directory into archive/, and returns
// the names moved, in name order. It moves read messages only, unread ones
// too if includeUnread (docs/mail-tree.md, Archive: nothing disappears unseen). A move is
// link(2) into archive/ then unlink(2) of the old name, so it never
// overwrites: a message whose name is taken in archive/ by a different file
// is left where it is and reported (crew.ErrConflict); one taken by an
// identical file (a move cut short by a crash) has its old name removed.
// Both directories are fsync(2)ed afterwards. Files that cannot be parsed
// stay where they are (List reports them). archive/ is created if missing.
// Temp files left by killed deliveries are removed once older than 36
// hours (staleTemp, Maildir's rule).
//
// It returns the names moved together with an error joining every message
// that could not be moved, or an error for the mailbox as a whole:
// crew.ErrInvalid for a bad agent id, crew.ErrNotFound for a missing
// mailbox, a symbolic link for the mailbox or archive/, or an I/O error.
// A concurrent SetRead of a message being moved may leave it in both
// places (the copy in the mail directory then shows as new again).
func (t Tree) Archive(agent string, olderThan time.Duration, includeUnread bool, now time.Time) ([]string, error) {
	r, err := t.openAgent(agent, false)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := mkdirIn(r, ArchiveDir, t.perm().Dir); err != nil {
		return nil, fmt.Errorf("archive mail of agent %s: %w", agent, err)
	}
	removeStaleTemps(r, now)
	files, _, err := t.readDir(r, agent, ".", func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	cutoff := now.Add(-olderThan)
	var moved []string
	var errs []error
	for _, f := range files {
		if !f.Mail.Archivable(cutoff, includeUnread) {
			continue
		}
		dst := filepath.Join(ArchiveDir, f.Name)
		err := linkNew(r, f.rel, dst)
		if errors.Is(err, fs.ErrExist) {
			if old, rerr := r.ReadFile(dst); rerr != nil || !bytes.Equal(old, f.data) {
				errs = append(errs, fmt.Errorf("archive %s: %s exists and differs; left in place: %w", f.Path, filepath.Join(t.Dir(agent), dst), crew.ErrConflict))
				continue
			}
			err = nil
		}
		if err == nil {
			err = r.Remove(f.rel)
			if errors.Is(err, fs.ErrNotExist) { // moved by the rename fallback
				err = nil
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("archive %s: %w", f.Path, err))
			continue
		}
		moved = append(moved, f.Name)
	}
	if len(moved) > 0 {
		for _, dir := range []string{ArchiveDir, "."} {
			if err := syncDir(r, dir); err != nil {
				errs = append(errs, fmt.Errorf("archive mail of agent %s: %w", agent, err))
			}
		}
	}
	return moved, errors.Join(errs...)
}
