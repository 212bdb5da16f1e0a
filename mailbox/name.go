// The names of a mail tree's files (docs/mail-tree.md, File names) and
// the entries that readers of a tree return.

package mailbox

import (
	"fmt"
	"slices"
	"strings"
)

// Name returns the file name of m in a mail tree (docs/mail-tree.md):
// <stamp>-<from>-<id>.json, where <stamp> is m.Timestamp in UTC as
// 2006-01-02T15-04-05.000Z (RFC 3339 with colons replaced by dashes and
// milliseconds kept), e.g. "2026-03-05T10-30-00.123Z-leader-0193a1c2-....json".
// Names of messages from one tree sort in time order, like Maildir's
// unique names (https://cr.yp.to/proto/maildir.html). Name does not check
// From or ID; Deliver does.
func Name(m Mail) string {
	return m.Timestamp.UTC().Format(stampLayout) + "-" + m.From + "-" + m.ID + ".json"
}

// Entry is one message file of a mail tree, as List and Find return it.
type Entry struct {
	Name     string // file name, e.g. 2026-03-05T10-30-00.123Z-leader-<id>.json
	Path     string // path of the file: Root/<agent>/[archive/]<Name>
	Mail     Mail   // the parsed content; Mail.ID is the file name without ".json" when the file has no id
	Archived bool   // the file is in archive/
}

// NameHasID reports whether name, a file name in a mail tree, is that of
// the message id: id itself, id + ".json", or a name as Name makes it,
// which ends in "-<id>.json". Find looks at such files first.
func NameHasID(name, id string) bool {
	return name == id || name == id+".json" || strings.HasSuffix(name, "-"+id+".json")
}

// IsFileName reports whether id, as given to Find, is a whole file name
// (it ends in ".json", is not hidden and names no directory): the file
// can then be opened by its name, without listing the mailbox.
func IsFileName(id string) bool {
	return strings.HasSuffix(id, ".json") && !strings.HasPrefix(id, ".") && !strings.ContainsAny(id, `/\`)
}

// HoldsMessage reports whether data, the content of a file in a mail
// tree, is the message id: what makes a delivery idempotent (a name
// already taken by the same message is delivered).
func HoldsMessage(data []byte, id string) bool {
	m, err := Parse(data)
	return err == nil && m.ID == id
}

// ParseEntry returns the entry of the file name, at path, whose content
// is data: Mail is ParseMessage's, with the name without ".json" as its
// ID when the file has none (docs/mail-tree.md, Fields). An error names
// path and wraps crew.ErrDamaged; the entry's Name, Path and Archived
// are set even then.
func ParseEntry(name, path string, archived bool, data []byte) (Entry, error) {
	e := Entry{Name: name, Path: path, Archived: archived}
	var err error
	if e.Mail, err = ParseMessage(data); err != nil {
		return e, fmt.Errorf("mail %s: %w", path, err)
	}
	if e.Mail.ID == "" {
		e.Mail.ID = strings.TrimSuffix(name, ".json")
	}
	return e, nil
}

// SortEntries sorts entries in the order List returns them: by
// Timestamp, then by Name (names of other tools, without milliseconds, do
// not sort with crew's within one second).
func SortEntries(entries []Entry) {
	slices.SortStableFunc(entries, func(a, b Entry) int {
		if c := a.Mail.Timestamp.Compare(b.Mail.Timestamp); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}
