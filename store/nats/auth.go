package nats

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/mailbox"
)

// Role is what an agent's NATS user may do (docs/nats.md, Authorization).
type Role string

const (
	// RoleLeader may create runs and tasks, publish events as the leader
	// ("leader" and its own agent id), create any agent's mailbox and read
	// every mailbox.
	RoleLeader Role = "leader"
	// RoleWorker may publish events as itself only, read its own mail
	// only, and create no run, task or bucket.
	RoleWorker Role = "worker"
)

// wakeSubjects are the subjects of the waiters' wake-ups: empty core
// NATS messages, one subject per run and participant (a task id, or the
// leader), which waiters subscribe to and writers publish on.
const wakeSubjects = "crew.wake.>"

// InboxPrefix is the prefix of the reply subjects of agent's connection:
// only agent's user may subscribe to them, so no other agent sees the
// answers to its requests (what it reads of its mail, of the log).
func InboxPrefix(agent string) string { return "_INBOX_" + agent }

// Permissions returns the publish and subscribe permissions of agent's
// NATS user in role: the subjects of the events it may publish (its own
// actor's, crew's), the JetStream API requests it needs on the run
// streams and the buckets, the mail keys it may read and write, and its
// own reply subjects. docs/nats.md, Authorization, has them as a table;
// everything else is refused by the server.
func Permissions(role Role, agent string) jwt.Permissions {
	a := strings.ToLower(agent)
	kvGet := func(bucket, key string) string {
		return "$JS.API.DIRECT.GET.KV_" + bucket + ".$KV." + bucket + "." + key
	}
	kvList := func(bucket, key string) string {
		return "$JS.API.CONSUMER.CREATE.KV_" + bucket + ".*.$KV." + bucket + "." + key
	}
	kvPut := func(bucket, key string) string { return "$KV." + bucket + "." + key }
	// Subject wildcards match whole tokens only, so the run streams
	// (CREW_RUN_<run>) are matched by "*", and the buckets' streams,
	// which "*" matches too, are denied where a wildcard would open them.
	pub := []string{
		// Events: its own actor's subject, and crew's own (worker.exited,
		// written by the crew spawn of the worker that exited).
		"crew.run.*." + agent, "crew.run.*.crew", "crew.run.*." + noActor,
		// Reading runs: account info, stream lookups, message gets and
		// the ordered consumers (unfiltered) of reads and waits.
		"$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST",
		"$JS.API.STREAM.INFO.*", "$JS.API.STREAM.MSG.GET.*",
		"$JS.API.CONSUMER.CREATE.*.*", "$JS.API.CONSUMER.MSG.NEXT.*.*",
		"$JS.API.CONSUMER.DELETE.*.*", "$JS.API.CONSUMER.INFO.*.*", "$JS.FC.>",
		// Its own mail and archive: read, list, flag, archive.
		kvGet(MailBucket, "mail."+agent+".>"), kvGet(MailBucket, "archive."+agent+".>"),
		kvList(MailBucket, "mail."+agent+".>"), kvList(MailBucket, "archive."+agent+".>"),
		kvPut(MailBucket, "mail."+agent+".>"), kvPut(MailBucket, "archive."+agent+".>"),
		// The copies of the messages it sends, in their recipients'
		// mailboxes (mail.<to>.<from>.<name>: only as their sender), and
		// of crew's own notices about it (a worker's exit); reading
		// them back makes a delivery idempotent.
		kvPut(MailBucket, "mail.*."+agent+".>"), kvGet(MailBucket, "mail.*."+agent+".>"), kvGet(MailBucket, "archive.*."+agent+".>"),
		kvPut(MailBucket, "mail.*.crew.>"), kvGet(MailBucket, "mail.*.crew.>"), kvGet(MailBucket, "archive.*.crew.>"),
		// Which mailboxes exist, the projection marks, the id claims.
		kvGet(MailBucket, "box.*"), kvList(MailBucket, "box.>"), kvGet(MailBucket, "projected.*"),
		// The runs' snapshots, read only: a worker's could be forged
		// (SnapshotBucket). They hold what the runs' logs hold.
		kvGet(SnapshotBucket, "*"),
		kvGet(MailBucket, "name.>"), kvPut(MailBucket, "box."+agent), kvPut(MailBucket, "name.box."+a),
		// Wake-ups (core NATS, crew.wake.<run>.<participant>): a writer
		// wakes the waiters of every participant its event concerns.
		// They carry nothing: a waiter woken reads the log, so a forged
		// one costs a read and changes nothing.
		wakeSubjects,
	}
	// What the wildcards above would open on the buckets: whole-bucket
	// reads (message gets, unfiltered consumers, pulls).
	deny := []string{
		"$JS.API.STREAM.MSG.GET.KV_" + MailBucket, "$JS.API.CONSUMER.CREATE.KV_" + MailBucket + ".*",
		"$JS.API.CONSUMER.MSG.NEXT.KV_" + MailBucket + ".*",
		"$JS.API.STREAM.MSG.GET.KV_" + LockBucket, "$JS.API.CONSUMER.CREATE.KV_" + LockBucket + ".*",
		"$JS.API.CONSUMER.MSG.NEXT.KV_" + LockBucket + ".*",
	}
	if role == RoleLeader {
		pub = append(pub,
			"crew.run.*.leader",
			// Creating runs and the buckets.
			"$JS.API.STREAM.CREATE.*",
			// Every mailbox: create (a task's agent's), read, list, deliver
			// any copy a writer left undelivered; the projection marks.
			kvPut(MailBucket, "box.*"), kvPut(MailBucket, "name.>"), kvPut(MailBucket, "mail.*.>"), kvPut(MailBucket, "projected.*"),
			// The runs' snapshots, written after the mark (SnapshotBucket).
			kvPut(SnapshotBucket, "*"),
			kvGet(MailBucket, ">"), "$JS.API.CONSUMER.CREATE.KV_"+MailBucket+".>",
			// The agents lock of creators of runs and tasks.
			kvGet(LockBucket, agentsKey), kvPut(LockBucket, agentsKey), "$JS.API.CONSUMER.CREATE.KV_"+LockBucket+".>",
		)
		deny = []string{"$JS.API.STREAM.MSG.GET.KV_" + MailBucket, "$JS.API.STREAM.MSG.GET.KV_" + LockBucket}
	}
	sort.Strings(pub)
	var p jwt.Permissions
	p.Pub.Allow.Add(pub...)
	p.Pub.Deny.Add(deny...)
	p.Sub.Allow.Add(InboxPrefix(agent)+".>", wakeSubjects)
	return p
}

// roleTag prefixes the tag of a user JWT that names its Role.
const roleTag = "crew-role:"

// CredsAgent returns the agent a credentials file belongs to (its user's
// name, as Authority.Creds writes it) and its role; "", "" when the file
// cannot be read or decoded (connecting then says why) or is no crew
// agent's.
func CredsAgent(path string) (string, Role) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", ""
	}
	tok, err := jwt.ParseDecoratedJWT(data)
	if err != nil {
		return "", ""
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil || crew.ValidateID("agent", uc.Name) != nil {
		return "", ""
	}
	var role Role
	for _, t := range uc.Tags {
		if r, ok := strings.CutPrefix(t, roleTag); ok {
			role = Role(r)
		}
	}
	return uc.Name, role
}

// denial records the server's permission refusals on a connection
// (nats.go reports them asynchronously, and drops the request: it would
// go unanswered until its timeout) and cancels the requests under way,
// so that a refused operation fails at once with crew.ErrDenied.
type denial struct {
	mu      sync.Mutex
	gen     uint64 // refusals so far
	last    string // the server's words for the last one
	next    int
	waiting map[int]context.CancelFunc
}

type denialWatch struct {
	gen uint64
	id  int
}

// handler is the connection's nats.ErrorHandler.
func (d *denial) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	d.last = strings.TrimPrefix(err.Error(), nats.ErrPermissionViolation.Error()+": ")
	for _, cancel := range d.waiting {
		cancel()
	}
}

// watch registers cancel, one request's, to be called on a refusal.
func (d *denial) watch(cancel context.CancelFunc) denialWatch {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.waiting == nil {
		d.waiting = map[int]context.CancelFunc{}
	}
	d.next++
	d.waiting[d.next] = cancel
	return denialWatch{gen: d.gen, id: d.next}
}

// since ends w and returns the server's words for a refusal since it
// began, or "".
func (d *denial) since(w denialWatch) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.waiting, w.id)
	if d.gen == w.gen {
		return ""
	}
	return d.last
}

// denied is the error of an operation the server refused: it names the
// agent the credentials belong to and what the server said.
func (s *Store) denied(refusal string) error {
	who := "these credentials"
	if s.agent != "" {
		who = "agent " + s.agent + " (the credentials' user)"
	}
	return fmt.Errorf("the server refused %s: %s; its role may not do this, and nothing was written (docs/nats.md, Authorization): %w", who, refusal, crew.ErrDenied)
}

// Agent returns the agent the store's credentials belong to, or "".
func (s *Store) Agent() string { return s.agent }

// mayProject reports whether this store's credentials may write what act
// asks of the mail tree: a worker's (RoleWorker) only the copies of what
// it sends (and crew's notices) and the read flags of its own mailbox;
// any other's everything. A worker's process leaves the rest, and the
// projection mark, to the leader's (docs/nats.md, Authorization).
func (s *Store) mayProject(act mailbox.Act) bool {
	if s.role != RoleWorker {
		return true
	}
	if act.Deliver != nil {
		return act.Deliver.From == s.agent || act.Deliver.From == "crew"
	}
	return act.Agent == s.agent
}

// Authority holds the keys that sign crew's NATS users: an operator, the
// account CREW (with JetStream) that every agent's user belongs to, and
// the system account. The server trusts the operator and preloads the
// two accounts (ServerConfig); a user signed by the account later (a task
// added) is admitted without touching the server. Its seeds are secrets:
// SaveAuthority writes them 0600.
type Authority struct {
	Operator, Account, System nkeys.KeyPair
}

// The files of an authority directory.
const (
	operatorSeedFile = "operator.nk"
	accountSeedFile  = "account.nk"
	systemSeedFile   = "system.nk"
	// ServerConfigFile is the server's configuration include: trusted
	// operator, system account, preloaded account JWTs.
	ServerConfigFile = "auth.conf"
)

// LoadAuthority reads the authority kept in dir, or makes a new one and
// writes it there (the directory 0700, seeds 0600) when dir has none.
func LoadAuthority(dir string) (*Authority, bool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	files := []string{operatorSeedFile, accountSeedFile, systemSeedFile}
	if _, err := os.Stat(filepath.Join(dir, operatorSeedFile)); errors.Is(err, os.ErrNotExist) {
		a := &Authority{}
		for i, mk := range []func() (nkeys.KeyPair, error){nkeys.CreateOperator, nkeys.CreateAccount, nkeys.CreateAccount} {
			kp, err := mk()
			if err != nil {
				return nil, false, err
			}
			seed, err := kp.Seed()
			if err != nil {
				return nil, false, err
			}
			if err := writeSecret(filepath.Join(dir, files[i]), seed); err != nil {
				return nil, false, err
			}
			*a.keys()[i] = kp
		}
		return a, true, nil
	}
	a := &Authority{}
	for i, f := range files {
		seed, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, false, err
		}
		kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
		if err != nil {
			return nil, false, fmt.Errorf("%s: not an nkey seed: %w", filepath.Join(dir, f), crew.ErrInvalid)
		}
		*a.keys()[i] = kp
	}
	return a, false, nil
}

func (a *Authority) keys() []*nkeys.KeyPair {
	return []*nkeys.KeyPair{&a.Operator, &a.Account, &a.System}
}

// writeSecret writes data to path, readable by its owner only (0600),
// through a temporary file renamed into place.
func writeSecret(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o600); err != nil { // an existing tmp kept its mode
		return err
	}
	return os.Rename(tmp, path)
}

// ServerConfig returns the server's authorization block, to include in
// its configuration: the trusted operator's JWT, the system account, and
// a memory resolver preloaded with the JWTs of the system account and of
// the account CREW (JetStream enabled, no limits). It holds no secret.
func (a *Authority) ServerConfig() (string, error) {
	opub, err := a.Operator.PublicKey()
	if err != nil {
		return "", err
	}
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "crew"
	sysPub, err := a.System.PublicKey()
	if err != nil {
		return "", err
	}
	oc.SystemAccount = sysPub
	opJWT, err := oc.Encode(a.Operator)
	if err != nil {
		return "", err
	}
	account := func(kp nkeys.KeyPair, name string, js bool) (string, string, error) {
		pub, err := kp.PublicKey()
		if err != nil {
			return "", "", err
		}
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		tok, err := ac.Encode(a.Operator)
		return pub, tok, err
	}
	_, sysJWT, err := account(a.System, "SYS", false)
	if err != nil {
		return "", err
	}
	accPub, accJWT, err := account(a.Account, "CREW", true)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# crew's NATS authorization (crew nats auth): an operator, the account CREW\n")
	b.WriteString("# that every agent's user belongs to, the system account. No secret here.\n")
	fmt.Fprintf(&b, "operator: %s\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: {\n", opJWT, sysPub)
	fmt.Fprintf(&b, "  %s: %s\n  %s: %s\n}\n", sysPub, sysJWT, accPub, accJWT)
	return b.String(), nil
}

// Creds returns a credentials file (a user JWT and its nkey seed, as
// nats.go's UserCredentials reads it) for agent in role: a new user of
// the account CREW named agent with Permissions(role, agent). It is a
// secret: write it 0600 (WriteCreds), never print it.
func (a *Authority) Creds(role Role, agent string) ([]byte, error) {
	if err := crew.ValidateID("agent", agent); err != nil {
		return nil, err
	}
	if agent == "crew" || (agent == "leader" && role != RoleLeader) {
		return nil, fmt.Errorf("agent %s: crew's own actor name or the leader's, no worker's: %w", agent, crew.ErrInvalid)
	}
	ukp, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	upub, err := ukp.PublicKey()
	if err != nil {
		return nil, err
	}
	uc := jwt.NewUserClaims(upub)
	uc.Name = agent
	uc.Tags.Add(roleTag + string(role))
	uc.Permissions = Permissions(role, agent)
	tok, err := uc.Encode(a.Account)
	if err != nil {
		return nil, err
	}
	seed, err := ukp.Seed()
	if err != nil {
		return nil, err
	}
	return jwt.FormatUserConfig(tok, seed)
}

// WriteCreds writes agent's credentials in role to dir/<agent>.creds,
// 0600, and returns the path.
func (a *Authority) WriteCreds(dir string, role Role, agent string) (string, error) {
	creds, err := a.Creds(role, agent)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, agent+".creds")
	return path, writeSecret(path, creds)
}
