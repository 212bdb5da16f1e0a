// The tree: one directory per agent under Root, made by Create and
// listed by Agents; delivery into it (Maildir's, in one directory: a
// hidden temp file, fsync(2), link(2), fsync(2) of the directory), read
// flags and the removal of a run's copies. AgentDir (agentdir.go) holds
// one agent's directory open for many deliveries; list.go reads a tree,
// archive.go moves old mail aside, fs.go holds the file-system steps.

package mailbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/fsys"
)

// Tree is a per-agent mail tree (docs/mail-tree.md): Root/<agent>/ holds one file per
// message, named by Name, and Root/<agent>/archive/ holds archived ones.
// Delivery follows Maildir (https://cr.yp.to/proto/maildir.html): write a
// hidden temp file in the recipient's directory, fsync(2) it, link(2) it to
// its final name, which never overwrites, and fsync(2) the directory. The
// hidden temp file stands in for Maildir's tmp/, and the flat directory for
// new/ and cur/, so that trees written by mail-async tools are read as they
// are. Writes never go through a symbolic link: an agent directory or
// archive directory that is a symlink is refused, and every file operation
// is confined to the agent directory (os.Root), so no id or link escapes
// the tree (docs/files.md, Permissions).
//
// Tree is a value: the zero Perm means crew.PrivatePerm. Any number of
// processes may deliver to one tree at once without a lock; see SetRead and
// Archive for what they do when they race.
type Tree struct {
	Root string    // the tree's directory, .crew/state/mail
	Perm crew.Perm // modes of new files and directories (docs/files.md, Permissions)
}

// perm returns t.Perm with zero modes replaced by crew.PrivatePerm's.
func (t Tree) perm() crew.Perm {
	p := t.Perm
	if p.File == 0 {
		p.File = crew.PrivatePerm.File
	}
	if p.Dir == 0 {
		p.Dir = crew.PrivatePerm.Dir
	}
	return p
}

// Dir returns the path of agent's mail directory, Root/<agent>. It does not
// check agent; the methods that touch the disk do.
func (t Tree) Dir(agent string) string { return filepath.Join(t.Root, agent) }

// createLock returns the path of the lock file that creators of
// mailboxes take in turn: beside the tree's root, not in it, where every
// entry is an agent's directory (.crew/state/.mail.lock).
func (t Tree) createLock() string {
	return filepath.Join(filepath.Dir(t.Root), "."+filepath.Base(t.Root)+".lock")
}

// Exists reports whether agent has a mailbox: agent is a valid id (docs/concepts.md, Identifiers)
// and Root/<agent> is a directory, not a symbolic link to one.
func (t Tree) Exists(agent string) bool {
	if crew.ValidateID("agent", agent) != nil {
		return false
	}
	fi, err := os.Lstat(t.Dir(agent))
	return err == nil && fi.IsDir()
}

// Create makes agent's mailbox, Root/<agent>/ and Root/<agent>/archive/
// (and Root if missing), with mode t.Perm.Dir (set exactly, whatever the
// umask). It succeeds if they already exist, like mkdir -p. It returns an
// error wrapping crew.ErrInvalid for an invalid agent id (docs/concepts.md, Identifiers),
// crew.ErrConflict if a mailbox whose name differs only in case exists
// (case-insensitive file systems), and an error if Root/<agent> or its
// archive is a symbolic link or not a directory.
func (t Tree) Create(agent string) error {
	if err := crew.ValidateID("agent", agent); err != nil {
		return err
	}
	perm := t.perm()
	if _, err := os.Lstat(t.Root); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(t.Root, perm.Dir); err != nil {
			return fmt.Errorf("create mail tree: %w", err)
		}
		if err := os.Chmod(t.Root, perm.Dir); err != nil {
			return fmt.Errorf("create mail tree: %w", err)
		}
	}
	// One creator at a time, from the check for a name in use (in any
	// letter case) to the new directory (docs/concepts.md, Identifiers).
	unlock, err := fsys.LockFile(t.createLock(), perm.File)
	if err != nil {
		return fmt.Errorf("create mailbox for agent %s: %w", agent, err)
	}
	defer unlock()
	agents, err := t.Agents()
	if err != nil {
		return err
	}
	for _, a := range agents {
		if a != agent && crew.SameID(a, agent) {
			return crew.Taken("mailbox", agent, a, "")
		}
	}
	mroot, err := os.OpenRoot(t.Root)
	if err != nil {
		return fmt.Errorf("create mailbox for agent %s: %w", agent, err)
	}
	defer mroot.Close()
	if err := mkdirIn(mroot, agent, perm.Dir); err != nil {
		return fmt.Errorf("create mailbox for agent %s: %w", agent, err)
	}
	r, err := t.openAgent(agent, false)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := mkdirIn(r, ArchiveDir, perm.Dir); err != nil {
		return fmt.Errorf("create mailbox for agent %s: %w", agent, err)
	}
	return nil
}

// Agents returns the names of the mailboxes in the tree, sorted: the
// sub-directories of Root that are valid agent ids (docs/concepts.md, Identifiers), not symbolic
// links and not hidden. A missing Root has no agents (nil, nil).
func (t Tree) Agents() ([]string, error) {
	des, err := os.ReadDir(t.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list mailboxes: %w", err)
	}
	var agents []string
	for _, de := range des {
		if de.IsDir() && crew.ValidateID("agent", de.Name()) == nil {
			agents = append(agents, de.Name())
		}
	}
	return agents, nil // os.ReadDir sorts by name
}

// openAgent opens agent's mail directory as an os.Root, so that nothing
// done through it leaves the directory. It refuses an invalid id
// (crew.ErrInvalid), a missing directory (crew.ErrNotFound; the message
// names --create-recipient if forDelivery), and a symbolic link.
func (t Tree) openAgent(agent string, forDelivery bool) (*os.Root, error) {
	if err := crew.ValidateID("agent", agent); err != nil {
		return nil, err
	}
	mroot, err := os.OpenRoot(t.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, NoMailbox(agent, forDelivery)
	}
	if err != nil {
		return nil, fmt.Errorf("open mail tree: %w", err)
	}
	defer mroot.Close()
	fi, err := mroot.Lstat(agent)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, NoMailbox(agent, forDelivery)
	case err != nil:
		return nil, fmt.Errorf("open mailbox for agent %s: %w", agent, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("mailbox for agent %s: %s is a symbolic link; crew does not write through links: %w", agent, t.Dir(agent), crew.ErrTampered)
	case !fi.IsDir():
		return nil, fmt.Errorf("mailbox for agent %s: %s is not a directory: %w", agent, t.Dir(agent), crew.ErrTampered)
	}
	r, err := mroot.OpenRoot(agent)
	if err != nil {
		return nil, fmt.Errorf("open mailbox for agent %s: %w", agent, err)
	}
	// The directory could have been swapped for a link between Lstat and
	// OpenRoot: make sure the one opened is the one checked.
	if st, err := r.Stat("."); err != nil || !os.SameFile(fi, st) {
		r.Close()
		return nil, fmt.Errorf("mailbox for agent %s: %s changed while it was opened: %w", agent, t.Dir(agent), crew.ErrTampered)
	}
	return r, nil
}

// Deliver writes m into agent's mail directory as the file Name(m) and
// returns that name. Following Maildir (https://cr.yp.to/proto/maildir.html)
// it writes a hidden temp file ".tmp-<uuid>" in the directory with mode
// t.Perm.File, fsync(2)s it if sync, link(2)s it to the final name (which
// never overwrites), removes the temp file and fsync(2)s the directory if
// sync. A crash leaves either no message or a complete one (plus, at worst,
// a hidden temp file that readers skip). sync=false is for projections
// (docs/mail-tree.md, Copies of run messages): the fsynced log can deliver a lost copy again.
//
// Delivery is idempotent: if a file of that name already exists in the
// directory or in archive/ and holds a message with the same id, Deliver
// writes nothing and returns the name and nil (its read flag is left as
// it is; see SetRead). A file of that name with another id, or any other
// file that is whole JSON, or a symbolic link, is an error wrapping
// crew.ErrConflict. A regular file of that name that holds no JSON at all
// (empty, cut short or zero-filled: a copy whose name survived a power
// cut and whose data, never fsynced, did not) is an earlier copy of the
// same message, since the name carries its id: it is replaced atomically
// by a rename, where it is (in archive/ too), and the message read again
// whole. On a file system without hard links the link falls back to a
// rename after checking the name is free.
//
// An empty m.Priority is delivered as events.DefaultPriority. Deliver
// returns an error wrapping crew.ErrInvalid, and writes nothing, if agent,
// m.From or m.ID is not a valid id (docs/concepts.md, Identifiers), m.Type
// is not one of Types, m.Priority is not one of events.Priorities, m.Timestamp is zero, or Marshal fails; one
// wrapping crew.ErrNotFound if agent has no mailbox; an error if the
// mailbox is a symbolic link or not a directory; and any I/O error, after
// removing its temp file.
func (t Tree) Deliver(agent string, m Mail, sync bool) (name string, err error) {
	if err := crew.ValidateID("agent", agent); err != nil {
		return "", err
	}
	d, err := t.openDir(agent, true)
	if err != nil {
		return "", err
	}
	defer d.Close()
	return d.Deliver(m, sync)
}

// SetRead sets the read flag of agent's message id (see Find; in the mail
// directory or archive/) to read. It replaces the file atomically: it
// writes a hidden temp file in the same directory (mode t.Perm.File,
// fsync(2)ed if sync) and renames it over the file's name, then fsync(2)s
// the directory if sync; readers see the old file or the new, never a mix.
// Only the value of "read" changes: every other byte is kept (if the file
// has no top-level "read" key, or more than one, it is rewritten compact
// with sorted keys, its keys and values kept). If the flag is already read,
// nothing is written.
//
// Just before the rename it checks that the name still holds the file it
// read; if Archive or another SetRead replaced or moved it meanwhile, it
// starts over (up to 3 times, then an error wrapping crew.ErrConflict). Its
// errors are Find's, that one, and I/O errors (after removing its temp
// file).
func (t Tree) SetRead(agent, id string, read bool, sync bool) error {
	d, err := t.openDir(agent, false)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.SetRead(id, read, sync)
}

// RemoveCopies removes from agent's mail directory and archive/ the
// copies of run's messages that keep does not want (keep gets the message
// id): copies are projections of the run's log (docs/mail-tree.md, Copies
// of run messages), so one of a message the log no longer holds (crew
// repair quarantined it) must not outlive it. Plain mail and other runs'
// copies are left alone, and so are files that cannot be read. It returns
// how many it removed; errors are openAgent's and those of the removals.
func (t Tree) RemoveCopies(agent, run string, keep func(id string) bool) (int, error) {
	r, err := t.openAgent(agent, false)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n := 0
	var errs []error
	for _, dir := range []string{".", ArchiveDir} {
		files, _, err := t.readDir(r, agent, dir, func(string) bool { return true })
		if err != nil {
			return n, err
		}
		removed := false
		for _, f := range files {
			if f.Mail.Run != run || keep(f.Mail.ID) {
				continue
			}
			if err := r.Remove(f.rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove %s: %w", f.Path, err))
				continue
			}
			n++
			removed = true
		}
		if removed {
			if err := syncDir(r, dir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return n, errors.Join(errs...)
}
