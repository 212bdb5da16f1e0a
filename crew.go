package crew

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Sentinel errors. Every error crew returns wraps at most one of them, and
// cmd/crew maps each to one exit code (docs/cli.md, Exit codes):
//
//	ErrInvalid    2  bad flag, id, priority or body
//	ErrConflict   3  not allowed in the task's current state
//	ErrNotFound   4  no state root, unknown run, task, agent or message
//	ErrTimeout    5  a wait ran out of time
//	ErrIncomplete 6  run wait: every task ended, but not all completed
//	ErrDamaged    7  the log is damaged or has a gap
//	ErrTampered   8  the state root holds a symbolic link (or another kind
//	                 of file) where crew keeps a file or directory;
//	                 on NATS, an event whose actor is not its subject's
//	ErrDenied     9  the NATS server refused the credentials' agent an
//	                 operation its role may not do (docs/nats.md, Authorization)
//
// Anything else is an I/O or internal error (exit 1).
var (
	ErrInvalid    = errors.New("invalid input")
	ErrConflict   = errors.New("conflict")
	ErrNotFound   = errors.New("not found")
	ErrTimeout    = errors.New("timed out")
	ErrIncomplete = errors.New("run ended incomplete")
	ErrDamaged    = errors.New("damaged")
	// ErrTampered is a state root that crew did not leave that way: a
	// symbolic link, or a file of another kind (a FIFO, a directory for a
	// file, a file for a directory), where crew keeps one of its own files
	// or directories (the log, a run directory, a mailbox, archive/).
	// crew neither reads nor writes through it, and crew repair does not
	// mend it: a person must look (docs/files.md, Permissions).
	ErrTampered = errors.New("state root tampered with")
	// ErrDenied is an operation the NATS server refused because the
	// credentials it was asked with belong to an agent whose role may not
	// do it (a worker responding as the leader, reading another agent's
	// mail): nothing was written (docs/nats.md, Authorization).
	ErrDenied = errors.New("permission denied")
)

// validID reports whether id matches ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$.
// It is written out rather than a regexp: compiling one at start-up is a
// measurable share of a short crew command's run time.
func validID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !IDByte(id[i]) || i == 0 && (id[i] == '_' || id[i] == '-') {
			return false
		}
	}
	return true
}

// IDByte reports whether c may be part of an id (IDRule): a letter, a
// digit, _ or -.
func IDByte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// IDRule is the identifier rule of docs/concepts.md (Identifiers), as shown in error messages.
const IDRule = "ids are 1-64 characters of A-Z a-z 0-9 _ -, starting with a letter or digit"

// ValidateID checks a run, task or agent id against docs/concepts.md, Identifiers:
// ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$. kind names the id in the message
// ("run", "task", "agent"). It returns an error wrapping ErrInvalid that
// names the bad value (quoted, so control characters are visible) and the
// rule.
func ValidateID(kind, id string) error {
	if validID(id) {
		return nil
	}
	return fmt.Errorf("invalid %s id %q: %s: %w", kind, id, IDRule, ErrInvalid)
}

// SameID reports whether two ids collide on a case-insensitive file system
// (docs/concepts.md, Identifiers: ids that differ only in case may not coexist).
func SameID(a, b string) bool { return strings.EqualFold(a, b) }

// Taken returns the error for creating a kind of thing ("run", "task",
// "mailbox") called want when held, its name in the same scope (where:
// "" or " in run r1"), is in use: crew.ErrConflict, saying so when the
// two differ only in letter case (docs/concepts.md, Identifiers).
func Taken(kind, want, held, where string) error {
	if want == held || want == "" {
		return fmt.Errorf("%s %s already exists%s: %w", kind, held, where, ErrConflict)
	}
	return fmt.Errorf("%s %s already exists%s; %s differs from it only in letter case, and ids that differ only in case may not coexist: %w", kind, held, where, want, ErrConflict)
}

// Perm is the pair of modes crew creates files and directories with
// (docs/files.md, Permissions): 0600/0700 by default, 0660/02770 with --shared-group.
type Perm struct {
	File os.FileMode // mode of new files
	Dir  os.FileMode // mode of new directories
}

// PrivatePerm is the default: only the owner reads and writes.
var PrivatePerm = Perm{File: 0o600, Dir: 0o700}

// SharedPerm is --shared-group: the group reads and writes too, and new
// directories inherit the group (setgid).
// (os.ModeSetgid: a bare 0o2000 is not the setgid bit of an os.FileMode,
// and os.Chmod would drop it).
var SharedPerm = Perm{File: 0o660, Dir: os.ModeSetgid | 0o770}

// NearID returns the id among ids that id most likely meant, "" when
// none is close: one that differs only in letter case (SameID), else the
// nearest by edit distance (letters added, removed or changed, ignoring
// case) within a third of id's length, at least one. It is the
// did-you-mean of an unknown id.
func NearID(id string, ids []string) string {
	best, bestD := "", len(id)/3
	if bestD < 1 {
		bestD = 1
	}
	for _, c := range ids {
		if c == id {
			continue
		}
		if SameID(c, id) {
			return c
		}
		if d := editDistance(strings.ToLower(c), strings.ToLower(id)); d <= bestD && (best == "" || d < bestD || c < best) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
