// The names of a mail tree's files (docs/mail-tree.md, File names) and
// the entries that readers of a tree return.

package mailbox

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
