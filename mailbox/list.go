// Reading a tree: List and Find, which skip hidden files and report,
// without stopping, the files they cannot read.

package mailbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/crew-dev/crew"
)

type fileEntry struct {
	Entry
	rel  string      // path relative to the agent directory
	data []byte      // the bytes read
	info fs.FileInfo // of the file read, to notice a concurrent replacement
}

// List returns agent's messages, in time order (by Timestamp, then Name:
// names of other tools without milliseconds do not sort with crew's within
// one second), and with includeArchive also those in archive/ (mixed in,
// marked Archived). It skips hidden files (names starting with ".", such as
// temp files of Deliver or of other tools) and sub-directories, as Maildir
// readers do (https://cr.yp.to/proto/maildir.html). A file that cannot be
// read or parsed, or is not a regular file (e.g. a symbolic link, which is
// not followed), or an archive/ that is a symbolic link, is reported in the
// []error, each naming its path (parse errors wrap crew.ErrDamaged), and
// the rest are still listed. The error is for the mailbox as a whole:
// crew.ErrInvalid for a bad agent id, crew.ErrNotFound for a missing
// mailbox, or a failure to read the directory.
func (t Tree) List(agent string, includeArchive bool) ([]Entry, []error, error) {
	r, err := t.openAgent(agent, false)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	dirs := []string{"."}
	if includeArchive {
		dirs = append(dirs, ArchiveDir)
	}
	var entries []Entry
	var errs []error
	for _, dir := range dirs {
		files, ferrs, err := t.readDir(r, agent, dir, func(string) bool { return true })
		if err != nil {
			return nil, nil, err
		}
		errs = append(errs, ferrs...)
		for _, f := range files {
			entries = append(entries, f.Entry)
		}
	}
	SortEntries(entries)
	return entries, errs, nil
}

// readDir reads the message files of dir ("." or ArchiveDir) in r whose
// names pass want, sorted by name. A missing archive/ is empty; an archive/
// that is a symbolic link is reported as a file error and not read.
func (t Tree) readDir(r *os.Root, agent, dir string, want func(name string) bool) ([]fileEntry, []error, error) {
	archived := dir == ArchiveDir
	if archived {
		fi, err := r.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, nil, nil
		case err != nil:
			return nil, []error{err}, nil
		case !fi.IsDir():
			return nil, []error{fmt.Errorf("%s is not a directory; not read: %w", filepath.Join(t.Dir(agent), dir), crew.ErrTampered)}, nil
		}
	}
	d, err := r.Open(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read mailbox of agent %s: %w", agent, err)
	}
	des, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("read mailbox of agent %s: %w", agent, err)
	}
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var files []fileEntry
	var errs []error
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") || de.IsDir() || !want(name) {
			continue
		}
		f, err := t.readEntry(r, agent, dir, name, de.Type())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		files = append(files, f)
	}
	return files, errs, nil
}

// readEntry reads and parses the message file name in dir ("." or
// ArchiveDir) of r, whose type (from its directory entry or Lstat) is typ.
// Symbolic links and other non-regular files are refused, not followed.
func (t Tree) readEntry(r *os.Root, agent, dir, name string, typ fs.FileMode) (fileEntry, error) {
	rel := filepath.Join(dir, name)
	f := fileEntry{Entry: Entry{Name: name, Path: filepath.Join(t.Dir(agent), rel), Archived: dir == ArchiveDir}, rel: rel}
	if typ&fs.ModeSymlink != 0 {
		return f, fmt.Errorf("mail %s: a symbolic link; not followed: %w", f.Path, crew.ErrTampered)
	} else if !typ.IsRegular() {
		return f, fmt.Errorf("mail %s: not a regular file (%s); not read: %w", f.Path, typ, crew.ErrTampered)
	}
	var err error
	f.data, f.info, err = readRegular(r, rel)
	if err != nil {
		return f, fmt.Errorf("mail %s: %w", f.Path, err)
	}
	f.Entry, err = ParseEntry(name, f.Path, f.Archived, f.data)
	return f, err
}

// Find returns agent's message with this id, looking in the mail directory
// first and then in archive/. id may also be the message's file name, with
// or without ".json". A
// crew-written file is found by its name (<...>-<id>.json) without reading
// the others; otherwise every file is read. Files that cannot be read or
// parsed are passed over. It returns an error wrapping crew.ErrNotFound if
// there is no such message or no mailbox, crew.ErrInvalid for a bad agent
// id or an empty id.
func (t Tree) Find(agent, id string) (Entry, error) {
	r, err := t.openAgent(agent, false)
	if err != nil {
		return Entry{}, err
	}
	defer r.Close()
	f, err := t.find(r, agent, id)
	return f.Entry, err
}

// find is Find within an opened mailbox.
func (t Tree) find(r *os.Root, agent, id string) (fileEntry, error) {
	if id == "" {
		return fileEntry{}, fmt.Errorf("find mail of agent %s: empty message id: %w", agent, crew.ErrInvalid)
	}
	byName := func(name string) bool { return NameHasID(name, id) }
	match := func(f fileEntry) bool { return f.Mail.ID == id || f.Name == id || f.Name == id+".json" }
	if IsFileName(id) {
		// A whole file name (what crew's own projections pass): open it
		// directly instead of reading a directory that may hold many
		// thousands of messages. Only a file by that name that cannot be
		// read sends the search on to the directories.
		exists := false
		for _, dir := range []string{".", ArchiveDir} {
			if dir == ArchiveDir {
				if fi, err := r.Lstat(dir); err != nil || !fi.IsDir() {
					break
				}
			}
			fi, err := r.Lstat(filepath.Join(dir, id))
			if err != nil {
				continue
			}
			exists = true
			if f, err := t.readEntry(r, agent, dir, id, fi.Mode().Type()); err == nil {
				return f, nil
			}
		}
		if !exists {
			return fileEntry{}, NoMessage(agent, id)
		}
	}
	var named error // why a file named like id could not be read
	for _, dir := range []string{".", ArchiveDir} {
		// The name of a crew-written file ends in its id: try those first.
		for i, want := range []func(string) bool{byName, func(n string) bool { return !byName(n) }} {
			files, ferrs, err := t.readDir(r, agent, dir, want)
			if err != nil {
				return fileEntry{}, err
			}
			for _, f := range files {
				if match(f) {
					return f, nil
				}
			}
			if i == 0 && named == nil && len(ferrs) > 0 {
				named = ferrs[0]
			}
		}
	}
	if named != nil {
		return fileEntry{}, named
	}
	return fileEntry{}, NoMessage(agent, id)
}
