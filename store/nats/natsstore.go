package nats

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/store"
)

// Options are the connection and storage settings of a Store.
type Options struct {
	// Creds is the path of a NATS credentials file (.creds: a user JWT
	// and its nkey seed). Its content is never printed.
	Creds string
	// TLSCA is the path of a PEM file of the certificate authorities
	// that sign the servers' certificates.
	TLSCA string
	// Replicas is the number of copies of each stream on a cluster (1 to
	// 5); 0 means 1. A run created with R replicas keeps them.
	Replicas int
	// Timeout bounds connecting and each request to the server; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// RetryFor is how long an operation keeps trying again after the
	// connection was lost or a request went unanswered (a node died and
	// the cluster elects a new leader, the client reconnects to
	// another); 0 means DefaultRetryFor. A context's deadline, when
	// earlier, ends it first.
	RetryFor time.Duration
	// KeepLogs makes Open return one Log per run for the Store's life
	// (the first Open's): the state it has reduced from the run's log is
	// kept, and each operation reads only what was appended since the
	// last, where a new Log replays the whole log first. For a process
	// that serves many operations on one connection (crew mcp, crew
	// serve). Without it, each Open is a new Log, as another process's.
	KeepLogs bool
	// QuietWaits says the process does nothing else of weight while a
	// participant waiter waits (a crew command, not crew mcp or crew
	// serve): each such wait turns the Go garbage collector's schedule off
	// until it returns, and with it the collection the runtime forces
	// every two minutes in an idle process, which was most of a thousand
	// idle waiters' CPU. A collection still runs if the heap grows
	// quietHeadroom meanwhile (quietBegin).
	QuietWaits bool
}

// DefaultTimeout bounds connecting and each request when
// Options.Timeout is 0.
const DefaultTimeout = 5 * time.Second

// DefaultRetryFor is Options.RetryFor when it is 0: longer than a
// cluster takes to elect a stream leader after a node dies.
const DefaultRetryFor = 30 * time.Second

// Store is a connection to a NATS server (or cluster) with JetStream, on
// which crew keeps its runs. Its methods are safe for concurrent use.
type Store struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	opts Options
	url  string // redacted: safe to print

	mail *Mail

	agent  string // the agent the credentials belong to (their user's name), or ""
	role   Role   // its role, or "" (no crew credentials: all it is let do)
	denial denial // the server's permission refusals

	mu      sync.Mutex
	streams map[string]jetstream.Stream // by run id
	logs    map[string]*Log             // by run id, with Options.KeepLogs
	lockKV  jetstream.KeyValue          // LockBucket, once found
	snapKV  jetstream.KeyValue          // SnapshotBucket, once found
	wakes   jetstream.Stream            // WakeStream, once found (wake.go)

	// read counts the events Read has decoded (tests: a reader that
	// starts from a snapshot reads only the events after it).
	read atomic.Int64

	waiters *waiterSet // wake-up waiters (wake.go), poked after a reconnection
}

// Dial connects to the servers in urls ("nats://HOST:PORT", several
// separated by commas; the scheme may be left out after the first) and
// checks that JetStream is enabled. An unreachable server, refused
// credentials or a server without JetStream is an error that names the
// servers (with any user and password in the URL left out) and what
// failed (for an unreachable one, the operating system's reason, such as
// "connection refused"); the content of the credentials and CA files is
// never part of it. Replicas out of 1..5 is crew.ErrInvalid.
func Dial(ctx context.Context, urls string, o Options) (*Store, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.RetryFor <= 0 {
		o.RetryFor = DefaultRetryFor
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Replicas < 1 || o.Replicas > 5 {
		return nil, fmt.Errorf("--nats-replicas %d: a stream has 1 to 5 replicas: %w", o.Replicas, crew.ErrInvalid)
	}
	shown := Redact(urls)
	waiters := &waiterSet{}
	nopts := []nats.Option{
		nats.Name("crew"),
		nats.Timeout(o.Timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(100 * time.Millisecond),
		nats.ReconnectJitter(50*time.Millisecond, 50*time.Millisecond),
		// Wake-ups sent while disconnected are lost: wake every waiter.
		nats.ReconnectHandler(func(*nats.Conn) { waiters.pokeAll() }),
	}
	agent, role := "", Role("")
	s := &Store{opts: o, url: shown, streams: map[string]jetstream.Stream{}, logs: map[string]*Log{}}
	if o.Creds != "" {
		nopts = append(nopts, nats.UserCredentials(o.Creds))
		if agent, role = CredsAgent(o.Creds); agent != "" {
			// Replies come to the agent's own inboxes, which only its
			// user may subscribe to (Permissions): no other agent sees
			// the answers to its requests (its mail, its reads).
			nopts = append(nopts, nats.CustomInboxPrefix(InboxPrefix(agent)))
		}
	}
	s.agent, s.role = agent, role
	nopts = append(nopts, nats.ErrorHandler(s.denial.handler))
	if o.TLSCA != "" {
		nopts = append(nopts, nats.RootCAs(o.TLSCA))
	}
	nc, err := nats.Connect(urls, nopts...)
	if err != nil {
		if errors.Is(err, nats.ErrNoServers) {
			if why := unreachable(urls, o.Timeout); why != "" {
				return nil, fmt.Errorf("connect to NATS at %s: %s", shown, why)
			}
		}
		return nil, fmt.Errorf("connect to NATS at %s: %v", shown, scrub(err, urls))
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(o.Timeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("NATS at %s: %v", shown, err)
	}
	actx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if _, err := js.AccountInfo(actx); err != nil {
		nc.Close()
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return nil, fmt.Errorf("NATS at %s has no JetStream: start nats-server with -js (or jetstream {} in its configuration)", shown)
		}
		return nil, fmt.Errorf("NATS at %s: JetStream account info: %v", shown, err)
	}
	s.nc, s.js, s.waiters = nc, js, waiters
	s.mail = &Mail{s: s}
	return s, nil
}

// unreachable dials each server of urls over TCP and returns why those
// that fail do ("dial tcp 127.0.0.1:4222: connect: connection refused"),
// joined; "" when every one answers (then the NATS error says more).
func unreachable(urls string, timeout time.Duration) string {
	var why []string
	for _, u := range strings.Split(urls, ",") {
		u = strings.TrimSpace(u)
		if !strings.Contains(u, "://") {
			u = "nats://" + u
		}
		p, err := url.Parse(u)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", Redact(u), err))
			continue
		}
		host := p.Host
		if p.Port() == "" {
			host = net.JoinHostPort(p.Hostname(), "4222")
		}
		c, err := net.DialTimeout("tcp", host, timeout)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		c.Close()
	}
	return strings.Join(why, "; ")
}

// Redact returns urls with any user name, password or token left out, for
// messages.
func Redact(urls string) string {
	var out []string
	for _, u := range strings.Split(urls, ",") {
		u = strings.TrimSpace(u)
		if i := strings.LastIndex(u, "@"); i >= 0 {
			// Everything between the scheme (which servers after the
			// first may leave out) and the last @ is credentials.
			scheme := ""
			if j := strings.Index(u, "://"); j >= 0 && j < i {
				scheme = u[:j+3]
			}
			u = scheme + u[i+1:]
		}
		out = append(out, u)
	}
	return strings.Join(out, ",")
}

// scrub removes the raw URL list from an error message, in case a client
// error quotes it with its credentials.
func scrub(err error, urls string) string {
	msg := err.Error()
	for _, u := range strings.Split(urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			msg = strings.ReplaceAll(msg, u, Redact(u))
		}
	}
	return msg
}

// URL returns the server list the store was dialled with, redacted.
func (s *Store) URL() string { return s.url }

// String implements store.Store: URL.
func (s *Store) String() string { return s.url }

// Close closes the connection.
func (s *Store) Close() error {
	s.nc.Close()
	return nil
}

// bound returns ctx limited to one request's timeout.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.Timeout)
}

// retry calls f, each call bounded by one request's timeout, until it
// returns nil or an error that final says trying again would not cure,
// ctx ends, or Options.RetryFor has passed: a request lost while a
// cluster elects a new leader, or while the client reconnects to another
// node, is asked again. It returns f's last error.
func (s *Store) retry(ctx context.Context, final func(error) bool, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.RetryFor)
	defer cancel()
	wait := 50 * time.Millisecond
	for {
		rctx, rcancel := s.bound(ctx)
		gen := s.denial.watch(rcancel)
		err := f(rctx)
		refusal := s.denial.since(gen)
		rcancel()
		if err != nil && refusal != "" {
			// The server refused a request of this attempt: it dropped
			// it unanswered, and asking again gets the same refusal.
			return s.denied(refusal)
		}
		if err == nil || final(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// refused reports whether err is the server's answer to a request (an
// API error: not found, wrong last sequence, too large, …) rather than a
// request that went unanswered or a server that cannot answer yet (a 5xx
// API error, such as a stream without a leader during a failover):
// asking again gets the same answer.
func refused(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code < 500
	}
	return errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, nats.ErrMaxPayload)
}

// StreamName returns the name of run's stream.
func StreamName(run string) string { return "CREW_RUN_" + run }

// Subject returns the subject of run's events whose actor is actor:
// crew.run.<run>.<actor>, or crew.run.<run>.- for an event without an
// actor. An agent's credentials may publish only on its own actor's
// subjects (Permissions), so a reader that finds an event on a subject
// that is not its actor's knows it was forged (crew.ErrTampered).
func Subject(run, actor string) string {
	if actor == "" {
		actor = noActor
	}
	return "crew.run." + run + "." + actor
}

// noActor is the last token of the subject of an event without an actor
// (no id can be "-": ids start with a letter or digit).
const noActor = "-"

// runSubjects is the subject filter of run's stream: every actor's.
func runSubjects(run string) string { return "crew.run." + run + ".*" }

// legacySubject is the one subject of the stream of a run created before
// events named their actor: its events are published and read there,
// without the actor check.
func legacySubject(run string) string { return "crew.run." + run }

const streamPrefix = "CREW_RUN_"

// Runs implements store.Store: the ids of the runs on the server, sorted.
func (s *Store) Runs(ctx context.Context) ([]string, error) {
	l := s.js.StreamNames(ctx, jetstream.WithStreamListSubject("crew.run.>"))
	var ids []string
	for name := range l.Name() {
		if id, ok := strings.CutPrefix(name, streamPrefix); ok {
			ids = append(ids, id)
		}
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("list runs on NATS at %s: %w", s.url, err)
	}
	sort.Strings(ids)
	return ids, nil
}

// CreateRun creates the stream of first.Run and appends first (seq 1, the
// run.created event) to it. A run id already in use, in any letter case,
// is crew.ErrConflict; a bad id is crew.ErrInvalid. Two processes
// creating the same run at once both find the stream (JetStream creates
// it once), and only one appends seq 1; a stream left empty by a
// creator that died in between is taken over by the next.
func (s *Store) CreateRun(ctx context.Context, first *events.Event) error {
	id := first.Run
	if err := crew.ValidateID("run", id); err != nil {
		return err
	}
	if first.Seq != 1 {
		return fmt.Errorf("create run %s: the first event has seq %d, not 1: %w", id, first.Seq, crew.ErrInvalid)
	}
	ids, err := s.Runs(ctx)
	if err != nil {
		return err
	}
	for _, other := range ids {
		if other != id && crew.SameID(other, id) {
			return crew.Taken("run", id, other, "")
		}
	}
	if err := s.mail.claim("run", id); err != nil { // another case of id made at this instant
		return err
	}
	var st jetstream.Stream
	err = s.retry(ctx, refused, func(rctx context.Context) (err error) {
		st, err = s.js.CreateStream(rctx, jetstream.StreamConfig{
			Name:        StreamName(id),
			Description: "crew run " + id + ": its events, seq = stream sequence",
			Subjects:    []string{runSubjects(id)},
			Storage:     jetstream.FileStorage,
			Replicas:    s.opts.Replicas,
			Retention:   jetstream.LimitsPolicy,
			DenyDelete:  true,
			DenyPurge:   true,
			Duplicates:  2 * time.Minute,
		})
		return err
	})
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		// There with other settings (replicas): whether it is taken is
		// what its first event says.
		st, err = s.stream(ctx, id)
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errReplicasNotSupported {
		return fmt.Errorf("create run %s: --nats-replicas %d, but the server at %s is no cluster (one copy only): %w", id, s.opts.Replicas, s.url, crew.ErrInvalid)
	}
	if err != nil {
		return fmt.Errorf("create run %s on NATS at %s: %w", id, s.url, err)
	}
	s.mu.Lock()
	s.streams[id] = st
	s.mu.Unlock()
	s.ensureWakeStream(ctx)
	// A fresh operation id: a second creator's publish must not pass for
	// a retry of the first's.
	if err := s.Append(ctx, first, "create-"+id+"-"+nuid.Next()); err != nil {
		if errors.Is(err, crew.ErrConflict) {
			return crew.Taken("run", id, id, "")
		}
		return err
	}
	return nil
}

// errReplicasNotSupported is JetStream's error code for replicas > 1 on a
// server that is not part of a cluster (nats-server errors.json,
// JSStreamReplicasNotSupportedErr).
const errReplicasNotSupported jetstream.ErrorCode = 10074

// stream returns run's stream; an unknown run is crew.ErrNotFound.
func (s *Store) stream(ctx context.Context, run string) (jetstream.Stream, error) {
	if err := crew.ValidateID("run", run); err != nil {
		return nil, err
	}
	s.mu.Lock()
	st := s.streams[run]
	s.mu.Unlock()
	if st != nil {
		return st, nil
	}
	err := s.retry(ctx, refused, func(rctx context.Context) (err error) {
		st, err = s.js.Stream(rctx, StreamName(run))
		return err
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("no run %s on NATS at %s (crew run list shows the runs): %w", run, s.url, crew.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("run %s on NATS at %s: %w", run, s.url, err)
	}
	s.mu.Lock()
	s.streams[run] = st
	s.mu.Unlock()
	return st, nil
}

// Append appends ev to the log of ev.Run as seq ev.Seq, if and only if
// the log's last event is seq ev.Seq-1 (Nats-Expected-Last-Sequence on
// the run's stream, whichever actor's subject ev is published on);
// otherwise it returns an error wrapping crew.ErrConflict and
// the caller reloads the state and tries again. opID names the
// operation (Nats-Msg-Id): a publish whose acknowledgement was lost is
// retried here with the same id, and the server stores it once (within
// the stream's duplicate window, 2 minutes), so an Append that returned
// nil appended ev exactly once. Unanswered requests are retried for
// Options.RetryFor. An event over the server's max_payload is
// crew.ErrInvalid; an unknown run crew.ErrNotFound.
func (s *Store) Append(ctx context.Context, ev *events.Event, opID string) error {
	if ev.Seq < 1 {
		return fmt.Errorf("append to run %s: seq %d: %w", ev.Run, ev.Seq, crew.ErrInvalid)
	}
	st, err := s.stream(ctx, ev.Run)
	if err != nil {
		return err
	}
	subject := Subject(ev.Run, ev.Actor)
	if legacy(st, ev.Run) {
		subject = legacySubject(ev.Run)
	}
	line, err := events.Marshal(ev)
	if err != nil {
		return err
	}
	data := line[:len(line)-1] // the message is the line without its '\n'
	var ack *jetstream.PubAck
	err = s.retry(ctx, refused, func(rctx context.Context) (err error) {
		// The wake records first (wake.go), then the event; the
		// compare-and-swap is on the stream's last sequence: the run's
		// events are on one subject per actor, all in its stream.
		s.announce(ev)
		ack, err = s.js.Publish(rctx, subject, data,
			jetstream.WithMsgID(opID),
			jetstream.WithExpectStream(StreamName(ev.Run)),
			jetstream.WithExpectLastSequence(uint64(ev.Seq-1)))
		return err
	})
	var apiErr *jetstream.APIError
	switch {
	case err == nil && ack.Sequence != uint64(ev.Seq):
		// A duplicate of an operation stored at another seq: not a
		// conflict to validate again against (that would store it a
		// second time), but a caller that reused an operation id.
		return fmt.Errorf("append seq %d to run %s: operation %s is already stored as seq %d", ev.Seq, ev.Run, opID, ack.Sequence)
	case err == nil:
		return nil
	case errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant):
		if s.stored(ctx, ev.Run, ev.Seq, opID) {
			// An earlier attempt of this publish was stored and its
			// acknowledgement lost: a single server checks the expected
			// seq before it looks for the duplicate (a cluster looks
			// first), so the retry is refused although it succeeded.
			return nil
		}
		return fmt.Errorf("append seq %d to run %s: another writer appended first: %w", ev.Seq, ev.Run, crew.ErrConflict)
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum, errors.Is(err, nats.ErrMaxPayload):
		return fmt.Errorf("append seq %d to run %s: the event is %d bytes, over the server's max_payload (%d bytes; raise max_payload, or lower --max-body): %w", ev.Seq, ev.Run, len(data), s.nc.MaxPayload(), crew.ErrInvalid)
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamNotFound:
		return fmt.Errorf("no run %s on NATS at %s: %w", ev.Run, s.url, crew.ErrNotFound)
	case s.stored(ctx, ev.Run, ev.Seq, opID):
		return nil // no answer came, but the event is there
	}
	return fmt.Errorf("append seq %d to run %s on NATS at %s: %w", ev.Seq, ev.Run, s.url, err)
}

// stored reports whether the message at seq of run's stream is the
// publish of operation opID (its Nats-Msg-Id header): an Append whose
// answer was lost, or refused on retry, that the server stored. It asks
// the stream's leader; a failure to ask reports false.
func (s *Store) stored(ctx context.Context, run string, seq int64, opID string) bool {
	st, err := s.stream(ctx, run)
	if err != nil {
		return false
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Timeout)
	defer cancel()
	m, err := st.GetMsg(rctx, uint64(seq))
	return err == nil && m.Header.Get(nats.MsgIdHdr) == opID
}

// Head returns the seq of the last event of run (0 for a stream created
// but not yet given its first event).
func (s *Store) Head(ctx context.Context, run string) (int64, error) {
	st, err := s.stream(ctx, run)
	if err != nil {
		return 0, err
	}
	var info *jetstream.StreamInfo
	err = s.retry(ctx, refused, func(rctx context.Context) (err error) {
		info, err = st.Info(rctx)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("run %s on NATS at %s: %w", run, s.url, err)
	}
	return int64(info.State.LastSeq), nil
}

// Event returns run's event with the given seq, read from the stream's
// leader; none is crew.ErrNotFound, one that cannot be decoded
// crew.ErrDamaged.
func (s *Store) Event(ctx context.Context, run string, seq int64) (*events.Event, error) {
	st, err := s.stream(ctx, run)
	if err != nil {
		return nil, err
	}
	e, err := s.get(ctx, st, run, seq)
	if err == nil && e == nil {
		err = fmt.Errorf("no event with seq %d in run %s: %w", seq, run, crew.ErrNotFound)
	}
	return e, err
}

// get reads message seq of run's stream st; nil, nil when there is none
// (past the log's end).
func (s *Store) get(ctx context.Context, st jetstream.Stream, run string, seq int64) (*events.Event, error) {
	if seq < 1 {
		return nil, nil
	}
	var m *jetstream.RawStreamMsg
	err := s.retry(ctx, refused, func(rctx context.Context) (err error) {
		m, err = st.GetMsg(rctx, uint64(seq))
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read seq %d of run %s on NATS at %s: %w", seq, run, s.url, err)
	}
	return decode(run, seq, m.Subject, m.Data)
}

// decode decodes message seq of run's stream, published on subject. An
// event on a subject that is not its actor's (Subject) is
// crew.ErrTampered: only credentials that may publish as another agent
// could have put it there.
func decode(run string, seq int64, subject string, data []byte) (*events.Event, error) {
	e, err := events.Decode(data)
	if err == nil && e.Seq != seq {
		err = fmt.Errorf("it says seq %d", e.Seq)
	}
	if err != nil {
		return nil, fmt.Errorf("run %s: message %d of its stream is no event: %v: %w", run, seq, err, crew.ErrDamaged)
	}
	if subject != Subject(run, e.Actor) && subject != legacySubject(run) {
		return nil, fmt.Errorf("run %s: event %d says its actor is %q but was published on %s, another actor's subject: %w", run, seq, e.Actor, subject, crew.ErrTampered)
	}
	return &e, nil
}

// legacy reports whether st, run's stream, is one of a run created before
// events named their actor (its one subject is legacySubject).
func legacy(st jetstream.Stream, run string) bool {
	info := st.CachedInfo()
	return info != nil && len(info.Config.Subjects) == 1 && info.Config.Subjects[0] == legacySubject(run)
}

// readBatch is how many events one pull of a cursor read asks for.
const readBatch = 512

// directReads is how many events Read gets one by one before it starts a
// consumer for the rest: most reads want a few events (a cursor's tail, a
// run's first event), or stop after a few.
const directReads = 4

// Read calls fn with run's events with seq > since, in seq order, up to
// the end of the log (at least its end when Read began). Its cost
// depends on what it returns: it starts at since+1 (the stream's
// sequence is the seq), gets the first few events one by one (most
// reads want a few, or stop early) until one is not there, and reads
// the rest, up to the head, through a consumer. An error from fn stops
// it and is returned; a message that is no event is crew.ErrDamaged.
func (s *Store) Read(ctx context.Context, run string, since int64, fn func(*events.Event) error) error {
	st, err := s.stream(ctx, run)
	if err != nil {
		return err
	}
	if since < 0 {
		since = 0
	}
	next := since + 1
	for ; next <= since+directReads; next++ {
		e, err := s.get(ctx, st, run, next)
		if err != nil {
			return err
		}
		if e == nil {
			return nil // the end of the log
		}
		s.read.Add(1)
		if err := fn(e); err != nil {
			return err
		}
	}
	head, err := s.Head(ctx, run)
	if err != nil || next > head {
		return err
	}
	// The rest through a consumer. One that goes unanswered (a node died
	// and the cluster elects a leader: "no responders") is made again
	// from the event it got to, for up to Options.RetryFor; what fn
	// returns, and damage, end the read at once.
	var stop error
	err = s.retry(ctx, func(err error) bool { return stop != nil || refused(err) }, func(rctx context.Context) error {
		c, err := st.OrderedConsumer(rctx, jetstream.OrderedConsumerConfig{
			DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:       uint64(next),
			InactiveThreshold: consumerIdle,
		})
		if err != nil {
			return err
		}
		defer s.dropConsumer(run, c)
		for next <= head {
			batch, err := c.Fetch(int(min(head-next+1, readBatch)), jetstream.FetchMaxWait(s.opts.Timeout))
			if err != nil {
				return err
			}
			got := 0
			for m := range batch.Messages() {
				got++
				s.read.Add(1)
				if stop = feed(run, next, m, fn); stop != nil {
					return stop
				}
				next++
			}
			if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
				return err
			}
			if got == 0 && ctx.Err() != nil {
				stop = ctx.Err()
				return stop
			}
		}
		return nil
	})
	if stop != nil {
		return stop
	}
	if err != nil {
		return fmt.Errorf("read run %s on NATS at %s: %w", run, s.url, err)
	}
	return nil
}

// feed decodes m, which must be the event with seq next of run, and
// calls fn with it; it returns fn's error, or crew.ErrDamaged for a
// message that is not that event.
func feed(run string, next int64, m jetstream.Msg, fn func(*events.Event) error) error {
	md, err := m.Metadata()
	if err != nil {
		return err
	}
	seq := int64(md.Sequence.Stream)
	if seq != next {
		return fmt.Errorf("run %s: expected seq %d, the stream gave %d: %w", run, next, seq, crew.ErrDamaged)
	}
	e, err := decode(run, seq, m.Subject(), m.Data())
	if err != nil {
		return err
	}
	return fn(e)
}

// consumerIdle is how long the server keeps a consumer of Read or Watch
// that nobody uses (their process died): each consumer costs the server
// work on every event appended, so it must not linger (nats.go's default
// is 5 minutes). A live one is deleted when its user is done with it.
const consumerIdle = 30 * time.Second

// dropConsumer deletes the ordered consumer c of run's stream, within
// one request's timeout; a failure leaves it to consumerIdle.
func (s *Store) dropConsumer(run string, c jetstream.Consumer) {
	ctx, cancel := s.bound(context.Background())
	defer cancel()
	if info := c.CachedInfo(); info != nil {
		s.js.DeleteConsumer(ctx, StreamName(run), info.Name)
	}
}

// Watcher wakes its user when a run's log grows.
type Watcher struct {
	s    *Store
	run  string
	c    jetstream.Consumer
	cc   jetstream.ConsumeContext
	wake chan struct{}
}

// Watch returns a Waiter for run that wakes when an event with seq >
// after is stored (at once if there is one already). It is a
// subscription: an ordered consumer from after+1 on that delivers the
// events' headers only (no bodies), recreated by the client after a
// reconnection or a failover from where it had got to. Close it.
func (s *Store) Watch(ctx context.Context, run string, after int64) (store.Waiter, error) {
	st, err := s.stream(ctx, run)
	if err != nil {
		return nil, err
	}
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       uint64(after + 1),
		HeadersOnly:       true,
		InactiveThreshold: consumerIdle,
	})
	if err != nil {
		return nil, fmt.Errorf("watch run %s on NATS at %s: %w", run, s.url, err)
	}
	w := &Watcher{s: s, run: run, c: c, wake: make(chan struct{}, 1)}
	w.cc, err = c.Consume(func(jetstream.Msg) {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}, jetstream.PullMaxMessages(16))
	if err != nil {
		return nil, fmt.Errorf("watch run %s on NATS at %s: %w", run, s.url, err)
	}
	return w, nil
}

// Wait blocks until the log has grown since the last Wait (or since Watch
// for the first) and returns nil, or returns ctx's error. A wake-up is a
// hint: the caller reads from its cursor to see what is new.
func (w *Watcher) Wait(ctx context.Context) error {
	select {
	case <-w.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the watcher and deletes its consumer, in the background: a
// waiter that has its answer prints it without waiting for the server.
func (w *Watcher) Close() error {
	w.cc.Stop()
	go w.s.dropConsumer(w.run, w.c)
	return nil
}
