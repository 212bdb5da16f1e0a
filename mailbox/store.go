package mailbox

import (
	"fmt"
	"time"

	"github.com/crew-dev/crew"
)

// Store is a per-agent mail tree (docs/mail-tree.md) wherever it is kept: Tree, the
// files under .crew/state/mail, or a tree kept on a server for agents that
// share no files (natsstore's JetStream key-value bucket). Every
// implementation keeps Tree's rules, which its methods document: one
// message per name (Name), delivery that never overwrites a whole
// message and is idempotent by id (a copy a power cut left without its
// data is delivered again), a read flag changed atomically, archive as a move
// that never archives an unread message unless asked, the sentinel errors
// crew.ErrInvalid, crew.ErrNotFound and crew.ErrConflict where Tree
// returns them. sync asks for a durable write where the store has a choice
// (a server decides durability itself and ignores it).
type Store interface {
	// Exists reports whether agent has a mailbox. A store that cannot be
	// asked (an unreachable server) reports false; the operation that
	// follows (Create, Deliver) then reports why.
	Exists(agent string) bool
	// Create makes agent's mailbox, like mkdir -p.
	Create(agent string) error
	// Agents returns the agents with a mailbox, sorted.
	Agents() ([]string, error)
	// Deliver stores m as agent's message Name(m) and returns the name.
	Deliver(agent string, m Mail, sync bool) (name string, err error)
	// List returns agent's messages in time order (with archived ones
	// when includeArchive), the messages that could not be read, and an
	// error for the mailbox as a whole.
	List(agent string, includeArchive bool) ([]Entry, []error, error)
	// Find returns agent's message by id or name.
	Find(agent, id string) (Entry, error)
	// SetRead sets the read flag of agent's message id.
	SetRead(agent, id string, read bool, sync bool) error
	// Archive moves agent's messages older than olderThan into its
	// archive and returns their names.
	Archive(agent string, olderThan time.Duration, includeUnread bool, now time.Time) ([]string, error)
	// OpenAgent opens agent's mailbox for many deliveries and read flags
	// in a row (a projection's copies), with the errors of Deliver for a
	// mailbox that is missing or refused.
	OpenAgent(agent string) (AgentBox, error)
}

// An AgentBox is one agent's mailbox of a Store, held open: Tree's is an
// AgentDir, which opens and checks the directory once for all of them.
// Its methods are Store's for that agent; it is used by one goroutine at
// a time. Close it.
type AgentBox interface {
	// Agent returns the agent whose mailbox it is.
	Agent() string
	// Deliver is Store.Deliver to the agent.
	Deliver(m Mail, sync bool) (name string, err error)
	// DeliverNew is Deliver, without sync, of a message that cannot have
	// been delivered before (a run message just committed): a store may
	// skip looking for an earlier or archived copy. A name already taken
	// is still refused, never overwritten, unless it holds no whole
	// message: a copy damaged by a power cut is replaced (Tree.Deliver).
	DeliverNew(m Mail) (name string, err error)
	// SetRead is Store.SetRead for the agent.
	SetRead(id string, read bool, sync bool) error
	// Close releases what the box holds open.
	Close() error
}

var _ AgentBox = (*AgentDir)(nil)

var _ Store = Tree{}

// NoMailbox returns the error of every Store for an agent without a
// mailbox: it wraps crew.ErrNotFound and, forDelivery, says how to make
// one (crew mail send --create-recipient).
func NoMailbox(agent string, forDelivery bool) error {
	if forDelivery {
		return fmt.Errorf("no mailbox for agent %s; create it with --create-recipient: %w", agent, crew.ErrNotFound)
	}
	return fmt.Errorf("no mailbox for agent %s: %w", agent, crew.ErrNotFound)
}

// NoMessage returns the error of every Store for a message id (or name)
// that agent's mailbox does not hold: it wraps crew.ErrNotFound.
func NoMessage(agent, id string) error {
	return fmt.Errorf("no message %s for agent %s: %w", id, agent, crew.ErrNotFound)
}
