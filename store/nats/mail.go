package nats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/mailbox"
)

// MailBucket is the JetStream key-value bucket that holds the per-agent
// mail tree (docs/mail-tree.md) of every run on a server, and how far each run's
// messages have been copied into it. Its keys:
//
//	box.<agent>                 the agent has a mailbox (like its directory)
//	mail.<agent>.<from>.<name>  a message from agent from: <name> and the value are the
//	                            mail file's name and content, as mailbox.File makes them
//	                            (mail.<agent>.<name> in buckets written before: still read)
//	archive.<agent>.<from>.<name> an archived message (crew mail archive)
//	projected.<run>             the seq up to which run's messages are copied here
//	name.<kind>.<lower-case id> the run or mailbox (kind "run" or "box") that holds an
//	                            id in any letter case: the value is the id as made
//
// Names are made of an agent id, a UUID and a time stamp, all valid key
// tokens. Each write is a compare-and-set on the key's revision
// (Nats-Expected-Last-Subject-Sequence; the runs' logs check the stream's
// last sequence instead): delivery
// creates a key only if it does not exist, a read flag is updated only
// if the message is unchanged since it was read, and archiving deletes
// the message only at the revision it copied.
const MailBucket = "CREW_MAIL"

// Mail is the mail tree of a Store, in MailBucket. It implements
// mailbox.Store with mailbox.Tree's rules, by calling the functions that
// state them rather than a copy: mailbox.File makes a message's name and
// content (defaults and checks included), mailbox.WithRead changes its
// read flag, mailbox.HoldsMessage tells a delivery already made,
// mailbox.IsFileName and mailbox.NameHasID find a message by name or id,
// mailbox.ParseEntry and mailbox.SortEntries read and order a mailbox,
// Mail.Archivable chooses what to archive, and mailbox.NoMailbox and
// mailbox.NoMessage are its errors. Each method is bounded by the store's
// request timeout. The bucket is created on first use with the store's
// replicas.
type Mail struct {
	s *Store

	mu    sync.Mutex
	kv    jetstream.KeyValue
	boxes map[string]bool // mailboxes known to exist: none is ever removed
}

var _ mailbox.Store = (*Mail)(nil)

// Mail returns the store's mail tree.
func (s *Store) Mail() mailbox.Store { return s.mail }

// bucket returns MailBucket, creating it if the server has none.
func (m *Mail) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.kv != nil {
		return m.kv, nil
	}
	kv, err := m.s.keyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      MailBucket,
		Description: "crew: the per-agent mail tree, the runs' projection marks, the ids in use",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    m.s.opts.Replicas,
	})
	if err != nil {
		return nil, err
	}
	m.kv = kv
	return kv, nil
}

// keyValue returns the key-value bucket cfg names, creating it with cfg
// if the server has none (or finding the one another process created
// meanwhile). Replicas above 1 on a server that is no cluster is
// crew.ErrInvalid.
func (s *Store) keyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := s.js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = s.js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = s.js.KeyValue(ctx, cfg.Bucket) // created by another process meanwhile
		}
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errReplicasNotSupported {
		return nil, fmt.Errorf("bucket %s: --nats-replicas %d, but the server at %s is no cluster (one copy only): %w", cfg.Bucket, cfg.Replicas, s.url, crew.ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s on NATS at %s: %w", cfg.Bucket, s.url, err)
	}
	return kv, nil
}

// do runs f with the bucket, each attempt bounded by one request's
// timeout, trying again (Store.retry) while the server does not answer
// (a failover), until f returns nil or an answer: mailbox.Store's
// methods take no context, and pass context.Background().
func (m *Mail) do(ctx context.Context, f func(ctx context.Context, kv jetstream.KeyValue) error) error {
	return m.s.retry(ctx, kvAnswer, func(rctx context.Context) error {
		kv, err := m.bucket(rctx)
		if err != nil {
			return err
		}
		return f(rctx, kv)
	})
}

// kvAnswer reports whether err is an answer that asking again would only
// repeat: the server's refusal, a key that is not there, or crew's own
// verdict on the message.
func kvAnswer(err error) bool {
	for _, answer := range []error{jetstream.ErrKeyNotFound, jetstream.ErrInvalidKey, crew.ErrInvalid, crew.ErrConflict, crew.ErrNotFound, crew.ErrDamaged} {
		if errors.Is(err, answer) {
			return true
		}
	}
	return refused(err)
}

func boxKey(agent string) string { return "box." + agent }

// mailKey is the key of the message name from sender in agent's
// mailbox: mail.<agent>.<from>.<name>. The sender is a token of its own
// so that the server can let an agent create copies only as their
// sender (Permissions); keys of the layout before, mail.<agent>.<name>,
// are still read (entryName).
func mailKey(agent, from, name string) string { return "mail." + agent + "." + from + "." + name }

// archiveKey is the key an archived message of mail key takes:
// archive.<agent>.<from>.<name>.
func archiveKey(key string) string { return "archive." + strings.TrimPrefix(key, "mail.") }

// senderOf returns the sender in name, a name as mailbox.Name makes it
// (<stamp>-<from>-<id>.json) with a UUID for its id, as crew's are; ""
// when name is not one.
func senderOf(name string) string {
	rest, ok := strings.CutSuffix(name, ".json")
	if !ok || len(rest) < len(stampLayout)+1+1+37 || !isStamp(rest) {
		return ""
	}
	rest = rest[len(stampLayout)+1:]
	id := rest[len(rest)-36:]
	from := rest[:len(rest)-37]
	if rest[len(rest)-37] != '-' || uuid.Validate(id) != nil || crew.ValidateID("agent", from) != nil {
		return ""
	}
	return from
}

// stampLayout is the time stamp a message name starts with
// (mailbox.Name).
const stampLayout = "2006-01-02T15-04-05.000Z"

func isStamp(s string) bool {
	if len(s) < len(stampLayout) {
		return false
	}
	_, err := time.Parse(stampLayout, s[:len(stampLayout)])
	return err == nil
}
func projectedKey(run string) string { return "projected." + run }
func nameKey(kind, id string) string { return "name." + kind + "." + strings.ToLower(id) }

// claim takes id, of a run or a mailbox (kind "run" or "box"), in every
// letter case at once: a create of name.<kind>.<lower-case id> succeeds
// for one creator only, so that of two ids that differ only in case,
// made at the same instant on two machines, one is refused (docs/concepts.md, Identifiers). An
// id already claimed in the same case (by an earlier or interrupted
// create of it) is taken again; in another case it is crew.ErrConflict.
func (m *Mail) claim(kind, id string) error {
	return m.do(context.Background(), func(ctx context.Context, kv jetstream.KeyValue) error {
		_, err := kv.Create(ctx, nameKey(kind, id), []byte(id))
		if !errors.Is(err, jetstream.ErrKeyExists) {
			if err != nil {
				return m.failed("claim "+kind+" "+id, err)
			}
			return nil
		}
		e, err := kv.Get(ctx, nameKey(kind, id))
		if err != nil {
			return m.failed("claim "+kind+" "+id, err)
		}
		if held := string(e.Value()); held != id {
			return crew.Taken(map[string]string{"run": "run", "box": "mailbox"}[kind], id, held, "")
		}
		return nil
	})
}
func entryPath(key string) string { return MailBucket + ":" + key }
func (m *Mail) failed(doing string, err error) error {
	return fmt.Errorf("%s on NATS at %s: %w", doing, m.s.url, err)
}

// Exists implements mailbox.Store: the key box.<agent> exists.
func (m *Mail) Exists(agent string) bool {
	if crew.ValidateID("agent", agent) != nil {
		return false
	}
	if m.known(agent) {
		return true
	}
	err := m.do(context.Background(), func(ctx context.Context, kv jetstream.KeyValue) error {
		_, err := kv.Get(ctx, boxKey(agent))
		return err
	})
	if err == nil {
		m.remember(agent)
	}
	return err == nil
}

func (m *Mail) known(agent string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.boxes[agent]
}

func (m *Mail) remember(agent string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.boxes == nil {
		m.boxes = map[string]bool{}
	}
	m.boxes[agent] = true
}

// Create implements mailbox.Store: it creates box.<agent>, unless a
// mailbox whose name differs only in case exists (crew.ErrConflict).
func (m *Mail) Create(agent string) error {
	if err := crew.ValidateID("agent", agent); err != nil {
		return err
	}
	if m.known(agent) {
		return nil
	}
	agents, err := m.Agents()
	if err != nil {
		return err
	}
	for _, a := range agents {
		if a == agent {
			m.remember(agent)
			return nil
		}
		if crew.SameID(a, agent) {
			return crew.Taken("mailbox", agent, a, "")
		}
	}
	if err := m.claim("box", agent); err != nil {
		return fmt.Errorf("create mailbox for agent %s: %w", agent, err)
	}
	return m.do(context.Background(), func(ctx context.Context, kv jetstream.KeyValue) error {
		_, err := kv.Create(ctx, boxKey(agent), []byte(agent))
		if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return m.failed("create mailbox for agent "+agent, err)
		}
		m.remember(agent)
		return nil
	})
}

// keys returns the keys of the bucket under prefix (e.g. "mail.alice."),
// sorted.
func (m *Mail) keys(prefix string) ([]string, error) {
	var keys []string
	err := m.do(context.Background(), func(ctx context.Context, kv jetstream.KeyValue) error {
		l, err := kv.ListKeysFiltered(ctx, prefix+">")
		if err != nil {
			return err
		}
		for k := range l.Keys() {
			keys = append(keys, k)
		}
		return ctx.Err()
	})
	if err != nil {
		return nil, m.failed("list "+prefix+"*", err)
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil // a busy bucket may report a key twice
}

// Agents implements mailbox.Store.
func (m *Mail) Agents() ([]string, error) {
	keys, err := m.keys("box.")
	var agents []string
	for _, k := range keys {
		agents = append(agents, strings.TrimPrefix(k, "box."))
	}
	return agents, err
}

// Deliver implements mailbox.Store: it creates mail.<agent>.<name>
// (mailbox.File), which never overwrites: an update at revision 0 (stored only
// if the key never held a value) takes a fresh name in one request. A
// message of that name with the same id already there, or already
// archived, is left as it is (the delivery is idempotent, and cheap to
// repeat); one with another id is crew.ErrConflict. The server stores the
// message before Deliver returns; sync is not needed.
func (m *Mail) Deliver(agent string, msg mailbox.Mail, sync bool) (string, error) {
	if err := crew.ValidateID("agent", agent); err != nil {
		return "", err
	}
	name, data, err := mailbox.File(msg)
	if err != nil {
		return "", fmt.Errorf("deliver to %s: %w", agent, err)
	}
	if !m.Exists(agent) {
		return "", mailbox.NoMailbox(agent, true)
	}
	err = m.do(context.Background(), func(ctx context.Context, kv jetstream.KeyValue) error {
		// A name that never held a message (not even one since archived
		// or deleted) is taken at once: an update at revision 0.
		key := mailKey(agent, msg.From, name)
		_, err := kv.Update(ctx, key, data, 0)
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			if errors.Is(err, jetstream.ErrInvalidKey) {
				return fmt.Errorf("deliver to %s: %q is not a valid key name: %w", agent, name, crew.ErrInvalid)
			}
			if err != nil {
				return m.failed("deliver to "+agent, err)
			}
			return nil
		}
		// The name is taken: most often by this very message, delivered
		// before (a projection done twice).
		e, err := kv.Get(ctx, key)
		switch {
		case err == nil && mailbox.HoldsMessage(e.Value(), msg.ID):
			return nil
		case err == nil:
			return fmt.Errorf("deliver to %s: %s holds another message: %w", agent, entryPath(key), crew.ErrConflict)
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			return m.failed("deliver to "+agent, err)
		}
		// Delivered before and archived since: delivering it again would
		// show an archived message as new.
		if e, err := kv.Get(ctx, archiveKey(key)); err == nil && mailbox.HoldsMessage(e.Value(), msg.ID) {
			return nil
		}
		_, err = kv.Create(ctx, key, data) // deleted otherwise: take it again
		if err != nil {
			return m.failed("deliver to "+agent, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return name, nil
}

// entry is a message of the bucket: its Entry and the revision read.
type entry struct {
	mailbox.Entry
	key  string
	data []byte
	rev  uint64
}

// read reads the message at key; a missing key is crew.ErrNotFound, one
// that does not parse crew.ErrDamaged.
func (m *Mail) read(ctx context.Context, kv jetstream.KeyValue, agent, key string) (entry, error) {
	kve, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return entry{}, mailbox.NoMessage(agent, entryName(agent, key))
	}
	if err != nil {
		return entry{}, m.failed("read "+entryPath(key), err)
	}
	return parseEntry(agent, kve)
}

// entryName is the message name in key (mail.<agent>.<from>.<name> or
// archive.<agent>.<from>.<name>; mail.<agent>.<name> in the layout
// before senders had a token).
func entryName(agent, key string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(key, "archive."+agent+"."), "mail."+agent+".")
	if from, name, ok := strings.Cut(rest, "."); ok && !isStamp(rest) && isStamp(name) && crew.ValidateID("agent", from) == nil {
		return name
	}
	return rest
}

// parseEntry makes the entry of agent's message kve; one that does not
// parse is crew.ErrDamaged.
func parseEntry(agent string, kve jetstream.KeyValueEntry) (entry, error) {
	key := kve.Key()
	e := entry{key: key, data: kve.Value(), rev: kve.Revision()}
	var err error
	e.Entry, err = mailbox.ParseEntry(entryName(agent, key), entryPath(key), strings.HasPrefix(key, "archive."), e.data)
	return e, err
}

// checkBox returns crew.ErrInvalid for a bad agent id and
// crew.ErrNotFound for an agent without a mailbox.
func (m *Mail) checkBox(agent string) error {
	if err := crew.ValidateID("agent", agent); err != nil {
		return err
	}
	if !m.Exists(agent) {
		return mailbox.NoMailbox(agent, false)
	}
	return nil
}

// List implements mailbox.Store: agent's messages in time order (then by
// name), archived ones too with includeArchive; one that does not parse
// is reported in the []error and the rest are listed.
func (m *Mail) List(agent string, includeArchive bool) ([]mailbox.Entry, []error, error) {
	if err := m.checkBox(agent); err != nil {
		return nil, nil, err
	}
	filters := []string{"mail." + agent + ".>"}
	if includeArchive {
		filters = append(filters, "archive."+agent+".>")
	}
	// One watch per filter: a consumer with one filter names it in the
	// subject of its create request, which is what an agent's
	// permissions allow (its own mail only; Permissions).
	var out []mailbox.Entry
	var errs []error
	// One watch delivers the messages' current values, then nil; it may
	// take long for a large mailbox, so what bounds it is the time
	// between two values, one request's timeout.
	err := m.do(context.Background(), func(ctx context.Context, kv jetstream.KeyValue) error {
		out, errs = nil, nil
		for _, filter := range filters {
			if err := m.watchAll(ctx, kv, agent, filter, &out, &errs); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, m.failed("list the mail of "+agent, err)
	}
	mailbox.SortEntries(out)
	return out, errs, nil
}

// watchAll adds the current values of the keys filter matches in agent's
// mailbox to out (those that do not parse to errs).
func (m *Mail) watchAll(_ context.Context, kv jetstream.KeyValue, agent, filter string, out *[]mailbox.Entry, errs *[]error) error {
	w, err := kv.Watch(context.Background(), filter, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop()
	idle := time.NewTimer(m.s.opts.Timeout)
	defer idle.Stop()
	for {
		select {
		case kve := <-w.Updates():
			if kve == nil {
				return nil
			}
			idle.Reset(m.s.opts.Timeout)
			e, err := parseEntry(agent, kve)
			if err != nil {
				*errs = append(*errs, err)
				continue
			}
			*out = append(*out, e.Entry)
		case <-idle.C:
			return fmt.Errorf("no answer in %s", m.s.opts.Timeout)
		}
	}
}

// Find implements mailbox.Store: id is a message id or a name (with or
// without ".json"); the mailbox is searched before its archive.
func (m *Mail) Find(agent, id string) (mailbox.Entry, error) {
	e, err := m.find(agent, id)
	return e.Entry, err
}

func (m *Mail) find(agent, id string) (entry, error) {
	if err := m.checkBox(agent); err != nil {
		return entry{}, err
	}
	if id == "" {
		return entry{}, fmt.Errorf("find mail of agent %s: empty message id: %w", agent, crew.ErrInvalid)
	}
	for _, prefix := range []string{"mail." + agent + ".", "archive." + agent + "."} {
		var keys []string
		if from := senderOf(id); from != "" {
			// A whole name (what the run's projection passes): its key,
			// or the key of the layout before.
			keys = []string{prefix + from + "." + id, prefix + id}
		} else {
			all, err := m.keys(prefix)
			if err != nil {
				return entry{}, err
			}
			for _, k := range all {
				if name := entryName(agent, k); name == id || !mailbox.IsFileName(id) && mailbox.NameHasID(name, id) {
					keys = append(keys, k)
				}
			}
		}
		for _, k := range keys {
			var e entry
			err := m.do(context.Background(), func(ctx context.Context, kv jetstream.KeyValue) (err error) {
				e, err = m.read(ctx, kv, agent, k)
				return err
			})
			if err == nil {
				return e, nil
			}
			if !errors.Is(err, crew.ErrNotFound) && !errors.Is(err, crew.ErrDamaged) {
				return entry{}, err
			}
		}
	}
	return entry{}, mailbox.NoMessage(agent, id)
}

// SetRead implements mailbox.Store: the message's "read" is set
// (mailbox.WithRead) with a compare-and-set on the revision it was read at; if another writer
// changed the message meanwhile, it reads it again (up to 3 times, then
// crew.ErrConflict). A message already in that state is left as it is.
func (m *Mail) SetRead(agent, id string, read bool, sync bool) error {
	for range 3 {
		e, err := m.find(agent, id)
		if err != nil {
			return err
		}
		if e.Mail.Read == read {
			return nil
		}
		data, err := mailbox.WithRead(e.data, read)
		if err != nil {
			return fmt.Errorf("mark %s: %w", e.Path, err)
		}
		err = m.do(context.Background(), func(ctx context.Context, kv jetstream.KeyValue) error {
			_, err := kv.Update(ctx, e.key, data, e.rev)
			return err
		})
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		if err != nil {
			return m.failed("mark "+e.Path, err)
		}
		return nil
	}
	return fmt.Errorf("mark message %s of agent %s: it kept changing while it was updated: %w", id, agent, crew.ErrConflict)
}

// Archive implements mailbox.Store. A move creates archive.<agent>.<name>
// (never overwriting: one holding the same bytes, left by a move cut
// short, is taken as done; another is crew.ErrConflict and the message
// stays) and then deletes mail.<agent>.<name> at the revision copied. If
// the message changed meanwhile (a read flag), the copy is brought up to
// date and the delete tried again, so nothing is archived with a stale
// flag and nothing is lost.
func (m *Mail) Archive(agent string, olderThan time.Duration, includeUnread bool, now time.Time) ([]string, error) {
	entries, _, err := m.List(agent, false)
	if err != nil {
		return nil, err
	}
	cutoff := now.Add(-olderThan)
	var moved []string
	var errs []error
	for _, en := range entries {
		if !en.Mail.Archivable(cutoff, includeUnread) {
			continue
		}
		if err := m.move(agent, strings.TrimPrefix(en.Path, MailBucket+":"), cutoff, includeUnread); err != nil {
			errs = append(errs, err)
			continue
		}
		moved = append(moved, en.Name)
	}
	return moved, errors.Join(errs...)
}

// move archives agent's message at key (see Archive).
func (m *Mail) move(agent, key string, cutoff time.Time, includeUnread bool) error {
	from, to := key, archiveKey(key)
	return m.do(context.Background(), func(ctx context.Context, kv jetstream.KeyValue) error {
		for range 3 {
			e, err := m.read(ctx, kv, agent, from)
			if err != nil {
				return err
			}
			if !e.Mail.Archivable(cutoff, includeUnread) {
				return nil // read again as unread: it stays (nothing disappears unseen)
			}
			arch, err := kv.Get(ctx, to)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
				_, err = kv.Create(ctx, to, e.data)
			case err != nil:
			case bytes.Equal(arch.Value(), e.data):
			case mailbox.HoldsMessage(arch.Value(), e.Mail.ID):
				_, err = kv.Update(ctx, to, e.data, arch.Revision()) // our own copy of an older revision
			default:
				return fmt.Errorf("archive %s: %s exists and differs; left in place: %w", e.Path, entryPath(to), crew.ErrConflict)
			}
			if err != nil {
				return m.failed("archive "+e.Path, err)
			}
			err = kv.Delete(ctx, from, jetstream.LastRevision(e.rev))
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				continue // changed while it was copied: copy it again
			}
			if err != nil {
				return m.failed("archive "+e.Path, err)
			}
			return nil
		}
		return fmt.Errorf("archive %s: it kept changing while it was moved: %w", entryPath(from), crew.ErrConflict)
	})
}

// Projected is the projection mark (Log.projectUpTo): the seq in projected.<run> and
// its revision (0, 0 when there is none).
func (s *Store) Projected(ctx context.Context, run string) (int64, uint64, error) {
	var seq int64
	var rev uint64
	err := s.mail.do(ctx, func(rctx context.Context, kv jetstream.KeyValue) error {
		e, err := kv.Get(rctx, projectedKey(run))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		rev = e.Revision()
		seq, err = strconv.ParseInt(string(e.Value()), 10, 64)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("projection mark of run %s on NATS at %s: %w", run, s.url, err)
	}
	return seq, rev, nil
}

// SetProjected moves the projection mark: projected.<run> becomes seq
// if its revision is still rev (0: if there is none), and its new
// revision is returned; otherwise crew.ErrConflict.
func (s *Store) SetProjected(ctx context.Context, run string, seq int64, rev uint64) (uint64, error) {
	var newRev uint64
	err := s.mail.do(ctx, func(rctx context.Context, kv jetstream.KeyValue) (err error) {
		// Update with revision 0 stores only if the key never had a value.
		newRev, err = kv.Update(rctx, projectedKey(run), []byte(strconv.FormatInt(seq, 10)), rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("projection mark of run %s moved: %w", run, crew.ErrConflict)
		}
		return err
	})
	return newRev, err
}

// OpenAgent implements mailbox.Store: agent's mailbox, which must exist
// (crew.ErrNotFound otherwise). The box holds nothing open; each of its
// calls is one of m's.
func (m *Mail) OpenAgent(agent string) (mailbox.AgentBox, error) {
	if err := m.checkBox(agent); err != nil {
		return nil, err
	}
	return agentBox{m: m, agent: agent}, nil
}

// agentBox is Mail's mailbox.AgentBox.
type agentBox struct {
	m     *Mail
	agent string
}

func (b agentBox) Agent() string { return b.agent }

func (b agentBox) Deliver(msg mailbox.Mail, sync bool) (string, error) {
	return b.m.Deliver(b.agent, msg, sync)
}

// DeliverNew is Deliver: a fresh name costs one request already.
func (b agentBox) DeliverNew(msg mailbox.Mail) (string, error) {
	return b.m.Deliver(b.agent, msg, false)
}

func (b agentBox) SetRead(id string, read, sync bool) error {
	return b.m.SetRead(b.agent, id, read, sync)
}

func (b agentBox) Close() error { return nil }
