package nats

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
)

// Wake-ups (docs/nats.md, Wake-ups). A waiter for some participants of a
// run subscribes, with core NATS (no JetStream consumer, nothing stored),
// to WakeSubject(run, participant) of each; a writer, once its event is
// stored, publishes an empty message to the subject of each participant
// the event concerns (state.Concerns). The server delivers it to those
// waiters only: a commit wakes its own waiters, not every waiter of the
// run, and the run's stream has no consumer per waiter.
//
// Core NATS does not store messages, so a wake-up can be lost: while a
// waiter's connection reconnects (its Store then wakes every waiter it
// has), or when a writer dies between its append and its publish.
// Before its append, a writer publishes the seq it is about to append to
// DueSubject of each participant the event concerns: the stream
// WakeStream keeps the last such wake record of each (in memory), and
// the waiter subscribes to its participants' records too. An announced
// append that no wake-up confirms within dueGrace is looked for in the
// log (one message get), again at growing intervals until the log holds
// its seq: a lost wake-up costs about a second, and a waiter with no
// write announced to it does nothing at all.
//
// The backstop covers what the subscriptions can miss (records sent
// while a connection reconnects or a route between servers breaks, a
// writer that announced before the waiter subscribed): every wakeRescan,
// the first one after a random part of it, a look that reads no event
// while the log has not grown (waiter.missed says why that misses
// nothing). On a server without the stream (made by crew run create),
// and for a participant with no record in it, the backstop reads the
// log instead, from where it last looked.
//
// The backstop's period is 2 minutes, twice the file store's rescan:
// what it bounds here is rarer. A lost wake-up alone is found through
// its record in about a second; the backstop is for a wake-up and its
// record both lost without a reconnection (a route between servers
// breaking), or a writer that announced before the subscription and
// died between its append and its wake-up. Each look costs an idle
// waiter about 1 ms of CPU on the 2-core machine of the benches (0.2 ms
// the Go runtime's own waking, whatever it does; the rest the request):
// the schedule, not only what a look does, sets an idle waiter's cost.
// A thousand waiters looking every 2 minutes use about 0.01 CPU-second
// a second (every minute, 0.014 to 0.023 in the bench's window).
var (
	// wakeRescan is the backstop's period (a variable for the tests).
	wakeRescan = 2 * time.Minute
	// dueGrace is how long an announced append waits for its wake-up
	// before the waiter looks for it in the log, and the first of the
	// doubling intervals (up to wakeRescan) at which it looks again
	// while the log does not hold it.
	dueGrace = time.Second
)

// WakeSubject is the subject of run's wake-ups for participant (a task id
// or state.Leader): crew.wake.<run>.<participant>.
func WakeSubject(run, participant string) string {
	return "crew.wake." + run + "." + participant
}

// DueSubject is the subject of participant's wake records in run
// (WakeStream): crew.wake.<run>.<participant>.due. A writer publishes
// one, holding the seq it is about to append in decimal, before it
// appends an event that concerns participant. The participant's waiters
// subscribe to it as well as to WakeSubject, which it does not match.
func DueSubject(run, participant string) string {
	return WakeSubject(run, participant) + ".due"
}

// WakeStream is the stream that keeps the last wake record of each run
// participant (DueSubject): in memory, one message per subject, for a
// day at most. It is a hint like the wake-ups, never the source of
// truth; a waiter that cannot read it reads the log.
//
// No record is ever pushed out by another's: once the stream is full
// (wakeStreamBytes), it refuses records on new subjects (DiscardNew) and still
// takes a participant's next record in place of its last, which is no
// larger (each record is wakeRecordLen digits, at most that many bytes:
// MaxMsgSize); JetStream key-value buckets rely on the same rule of the
// server. With DiscardOld, any member (a worker may publish every
// participant's records) could flood the stream and push the others'
// records out, and a waiter whose wake-up was lost too would then never
// see its answer. A participant with no record (refused, expired, or
// never written) is one a waiter cannot judge by records: it reads the
// log (waiter.look).
const WakeStream = "CREW_WAKES"

// wakeStreamBytes is how much WakeStream holds (a variable for the
// tests).
var wakeStreamBytes int64 = 64 << 20

// wakeRecordLen is the length of a wake record: its seq in decimal,
// zero-padded, so that a participant's next record is never larger
// than its last (WakeStream).
const wakeRecordLen = 19

// wakeRecordData returns the record of seq: wakeRecordLen decimal
// digits.
func wakeRecordData(seq int64) []byte {
	return fmt.Appendf(nil, "%0*d", wakeRecordLen, seq)
}

// wakeRecordAge is how long WakeStream keeps a record. A waiter whose
// looks at the records were further apart than half of it (its machine
// slept) wakes its owner rather than trust a record that may have come
// and gone.
const wakeRecordAge = 24 * time.Hour

// dueMax is how many announced seqs a waiter keeps to look for: the
// lowest (forged records, far ahead, do not push a real one out). Those
// it drops are the backstop's.
const dueMax = 8

// ensureWakeStream creates WakeStream if the server has none. A failure
// (no right to create streams, a server short of memory) leaves the
// waiters' backstops to read the log.
func (s *Store) ensureWakeStream(ctx context.Context) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	st, err := s.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:              WakeStream,
		Description:       "crew: the last wake record of each run participant, for the waiters' rescans",
		Subjects:          []string{DueSubject("*", "*")},
		Storage:           jetstream.MemoryStorage,
		Replicas:          s.opts.Replicas,
		MaxMsgsPerSubject: 1,
		MaxAge:            wakeRecordAge,
		MaxBytes:          wakeStreamBytes,
		MaxMsgSize:        wakeRecordLen,
		Discard:           jetstream.DiscardNew,
	})
	if err == nil {
		s.mu.Lock()
		s.wakes = st
		s.mu.Unlock()
	}
}

// announce publishes the wake records of ev (DueSubject of each
// participant it concerns), before ev is appended: with the connection's
// next flush, which the append's request is, so the server has them
// (and has handed them to the participants' waiters) before it stores ev.
func (s *Store) announce(ev *events.Event) {
	data := wakeRecordData(ev.Seq)
	for _, p := range state.Concerns(ev) {
		s.nc.Publish(DueSubject(ev.Run, p), data)
	}
}

// notify publishes the wake-ups of evs, each participant once, each
// holding the seq of the first event that concerns the participant, in
// decimal (store.Hinter: where a woken owner looks first). The messages
// leave with the connection's next flush (at once, in the client's
// flusher), not waited for.
func (s *Store) notify(run string, evs []*events.Event) {
	seen := map[string]bool{}
	for _, e := range evs {
		for _, p := range state.Concerns(e) {
			if !seen[p] {
				seen[p] = true
				s.nc.Publish(WakeSubject(run, p), strconv.AppendInt(nil, e.Seq, 10))
			}
		}
	}
}

// wakeRecord is a participant's last wake record as a look saw it: its
// message's seq in WakeStream and time in Unix nanoseconds (a server
// restarted with an empty stream numbers from 1 again); zero when there
// was none.
type wakeRecord struct {
	seq  uint64
	time int64
}

// errNoWakeStream: the server has no WakeStream.
var errNoWakeStream = errors.New("no wake stream")

// wakeStream returns WakeStream, looked up once (a stream info request)
// unless this Store made it; none on the server is errNoWakeStream.
func (s *Store) wakeStream(ctx context.Context) (jetstream.Stream, error) {
	s.mu.Lock()
	st := s.wakes
	s.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := s.js.Stream(ctx, WakeStream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, nats.ErrNoResponders):
		return nil, errNoWakeStream
	case err != nil:
		return nil, err
	case st.CachedInfo().Config.Discard != jetstream.DiscardNew:
		// Made by an earlier crew, which let a flood push records out
		// (WakeStream): the log, not its records.
		return nil, errNoWakeStream
	}
	s.mu.Lock()
	s.wakes = st
	s.mu.Unlock()
	return st, nil
}

// wakeRecordOf returns participant's last wake record in run: one
// $JS.API.STREAM.MSG.GET request with last_by_subj.
func (s *Store) wakeRecordOf(ctx context.Context, run, participant string) (wakeRecord, error) {
	st, err := s.wakeStream(ctx)
	if err != nil {
		return wakeRecord{}, err
	}
	m, err := st.GetLastMsgForSubject(ctx, DueSubject(run, participant))
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return wakeRecord{}, nil
	case errors.Is(err, nats.ErrNoResponders), errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamNotFound:
		return wakeRecord{}, errNoWakeStream // deleted since, or a server restarted without it
	case err != nil:
		return wakeRecord{}, fmt.Errorf("wake record of %s in run %s: %w", participant, run, err)
	}
	return wakeRecord{seq: m.Sequence, time: m.Time.UnixNano()}, nil
}

// wakeWaiter is a Watch for participants.
type wakeWaiter struct {
	s            *Store
	run          string
	participants []string
	subs         []*nats.Subscription
	wake         chan struct{} // a wake-up came (or the connection came back)
	announced    chan struct{} // a record came when none was due: the next look is sooner
	every        time.Duration // the backstop's period: wakeRescan (tests set others)
	next         time.Time     // when the backstop looks next

	// The backstop's baseline (Wait's goroutine only; waiter.missed).
	// byLog: the backstop reads the log (the server has no WakeStream
	// crew trusts, or a participant has no record: judged); head is how
	// far it has looked. recs are the participants'
	// wake records as last seen; pending is a seq at which an event
	// announced before then may still be appended (0: none); checked is
	// when the records were last read; looks counts the backstop's looks.
	byLog   bool
	head    int64
	recs    []wakeRecord
	pending int64
	checked time.Time
	looks   int

	mu   sync.Mutex
	hint int64 // the lowest seq the wake-ups named since the last Hint (0: none)
	// due are the announced seqs (records received) that no wake-up
	// has confirmed and the log was not seen to hold, lowest first;
	// dueAt is when Wait looks for them next (zero: none due), dueGap
	// the interval after that; dueLooks counts those looks.
	due      []int64
	dueAt    time.Time
	dueGap   time.Duration
	dueLooks int
}

var _ store.Hinter = (*wakeWaiter)(nil)

// watchFor subscribes to the wake-ups and wake records of participants
// of run; the subscriptions are on the server (flushed), and the
// backstop's baseline read (waiter.look), before it returns: its caller
// reads the state after.
func (s *Store) watchFor(ctx context.Context, run string, participants []string) (store.Waiter, error) {
	w := &wakeWaiter{s: s, run: run, participants: participants, wake: make(chan struct{}, 1), announced: make(chan struct{}, 1), every: wakeRescan}
	w.next = store.FirstRescan(w.every)
	for _, p := range participants {
		for subject, fn := range map[string]nats.MsgHandler{WakeSubject(run, p): w.woken, DueSubject(run, p): w.recorded} {
			sub, err := s.nc.Subscribe(subject, fn)
			if err != nil {
				w.Close()
				return nil, fmt.Errorf("watch run %s on NATS at %s: %w", run, s.url, err)
			}
			w.subs = append(w.subs, sub)
		}
	}
	if err := s.nc.FlushWithContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("watch run %s on NATS at %s: %w", run, s.url, err)
	}
	if err := w.look(ctx, true); err != nil {
		w.Close()
		return nil, err
	}
	s.waiters.add(w)
	return w, nil
}

// woken handles a wake-up: it confirms the announced seqs up to the one
// it names (the owner, woken, reads at least that far) and wakes Wait.
func (w *wakeWaiter) woken(m *nats.Msg) {
	if seq, err := strconv.ParseInt(string(m.Data), 10, 64); err == nil && seq > 0 {
		w.mu.Lock()
		if w.hint == 0 || seq < w.hint {
			w.hint = seq
		}
		w.due = slices.DeleteFunc(w.due, func(d int64) bool { return d <= seq })
		if len(w.due) == 0 {
			w.dueAt = time.Time{}
		}
		w.mu.Unlock()
	}
	w.poke()
}

// recorded handles a wake record: an append of that seq is announced,
// and due until a wake-up confirms it or the log is seen to hold it.
func (w *wakeWaiter) recorded(m *nats.Msg) {
	seq, err := strconv.ParseInt(string(m.Data), 10, 64)
	if err != nil || seq < 1 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	i, found := slices.BinarySearch(w.due, seq)
	if found || i >= dueMax {
		return // a retry of the same append; or the backstop's
	}
	w.due = slices.Insert(w.due, i, seq)
	if len(w.due) > dueMax {
		w.due = w.due[:dueMax]
	}
	if w.dueAt.IsZero() {
		w.dueGap = dueGrace
		w.dueAt = time.Now().Add(dueGrace)
		select {
		case w.announced <- struct{}{}:
		default:
		}
	}
}

// look reads the participants' wake records, then the log's head H, as
// the backstop's baseline (waiter.missed): its owner reads after it.
// Records that cannot be read at the Watch (first), or a server without
// WakeStream, leave the backstop to read the log from H.
func (w *wakeWaiter) look(ctx context.Context, first bool) error {
	recs, err := w.records(ctx)
	hctx, cancel := w.s.bound(ctx)
	head, herr := w.s.Head(hctx, w.run)
	cancel()
	if herr != nil {
		return herr
	}
	if err != nil && (first || errors.Is(err, errNoWakeStream)) || err == nil && !judged(recs) {
		w.byLog = true
	}
	w.head, w.pending = head, head+1
	if err == nil {
		w.recs, w.checked = recs, time.Now()
	}
	return nil
}

// judged reports whether the waiter's records let it judge what it may
// have missed: every participant has one. A participant with none may
// have had one refused (a full stream) or expired: the log tells
// (WakeStream).
func judged(recs []wakeRecord) bool {
	return !slices.Contains(recs, wakeRecord{})
}

// records reads the wake records of the waiter's participants.
func (w *wakeWaiter) records(ctx context.Context) ([]wakeRecord, error) {
	recs := make([]wakeRecord, len(w.participants))
	for i, p := range w.participants {
		rctx, cancel := w.s.bound(ctx)
		r, err := w.s.wakeRecordOf(rctx, w.run, p)
		cancel()
		if err != nil {
			return nil, err
		}
		recs[i] = r
	}
	return recs, nil
}

func (w *wakeWaiter) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Hint implements store.Hinter: the lowest seq the wake-ups named since
// the last call (a wake-up from before the store named none).
func (w *wakeWaiter) Hint() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.hint
	w.hint = 0
	return h
}

// Wait implements store.Waiter: it returns when a wake-up came, an
// announced append was found in the log and concerns the waiter, or the
// backstop found what it may have missed; or with ctx's error. The
// backstop keeps its period across Waits: a wake-up does not bring its
// next look sooner or later. A look that says yes once ctx has ended
// returns ctx's error: its requests failed with ctx, which is no sign
// of an event (and one found as ctx ended is the caller's to read).
func (w *wakeWaiter) Wait(ctx context.Context) error {
	if w.s.opts.QuietWaits {
		defer quietBegin()()
	}
	for {
		at := w.next
		w.mu.Lock()
		if !w.dueAt.IsZero() && w.dueAt.Before(at) {
			at = w.dueAt
		}
		w.mu.Unlock()
		t := time.NewTimer(time.Until(at))
		select {
		case <-w.wake:
			t.Stop()
			return nil
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-w.announced:
			t.Stop()
			continue
		case <-t.C:
		}
		now := time.Now()
		w.mu.Lock()
		due := !w.dueAt.IsZero() && !now.Before(w.dueAt)
		w.mu.Unlock()
		if due && w.dueFound(ctx) {
			return ctx.Err()
		}
		if !now.Before(w.next) {
			w.next = now.Add(w.every)
			if w.missed(ctx) {
				return ctx.Err()
			}
		}
	}
}

// dueFound looks in the log for the announced seqs no wake-up has
// confirmed (one message get each, up to the first the log does not
// hold yet), and reports whether one holds an event that concerns the
// waiter's participants (or a get failed: the owner looks for itself).
// A seq the log holds is done with (its event, or a rival writer's that
// took its place); the others are looked for again, at doubling
// intervals up to the backstop's period, until the log holds them.
func (w *wakeWaiter) dueFound(ctx context.Context) bool {
	w.mu.Lock()
	seqs := slices.Clone(w.due)
	w.dueLooks++
	w.mu.Unlock()
	found, held := false, int64(0)
	for _, seq := range seqs {
		ectx, cancel := w.s.bound(ctx)
		e, err := w.s.Event(ectx, w.run, seq)
		cancel()
		if errors.Is(err, crew.ErrNotFound) {
			break // nor any later seq
		}
		if err != nil {
			found = true
			break
		}
		held = seq
		found = found || w.concerns(e)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.due = slices.DeleteFunc(w.due, func(d int64) bool { return d <= held })
	if len(w.due) == 0 {
		w.dueAt = time.Time{}
	} else {
		w.dueGap = min(2*w.dueGap, w.every)
		w.dueAt = time.Now().Add(w.dueGap)
	}
	return found
}

// missed is the backstop's look: it reports whether an event that
// concerns the waiter's participants may have been appended since its
// owner last read (since the Watch, or since missed last said yes), its
// wake-up lost and its record too (or announced before the Watch
// subscribed). A look that fails says yes: its owner looks for itself.
//
// The baseline (waiter.look) is the participants' records, then the
// log's head H, read before the owner's read. An idle look is one
// message get: while the log holds no event at H+1 (pending), nothing
// was appended since the owner's read, and nothing can be missed. Once
// it holds one, that event is read (the owner woken if it concerns it)
// and the records are read: if one changed since the baseline, the
// owner is woken and the baseline read again. Why that misses nothing:
// the writer of an event at seq M that concerns p published p's record,
// then appended. If it did so after the owner's read (which came after
// the baseline's records and then H), then either it loaded the log at
// H or later, after the records were read, so its record was stored
// after the baseline and a later look sees it changed; or it loaded the
// log before H, and its append can only have landed at H+1, the first
// seq after H (one at M ≤ H was seen by the owner, or failed, and a
// writer that tries again publishes again), which is read. On a server
// without WakeStream, it reads the log (missedInLog).
func (w *wakeWaiter) missed(ctx context.Context) bool {
	w.looks++
	if w.byLog {
		return w.missedInLog(ctx)
	}
	if w.pending != 0 {
		ectx, cancel := w.s.bound(ctx)
		e, err := w.s.Event(ectx, w.run, w.pending)
		cancel()
		switch {
		case errors.Is(err, crew.ErrNotFound):
			return false // nothing appended since the baseline
		case err != nil:
			return true
		}
		w.pending = 0
		if w.concerns(e) {
			if err := w.look(ctx, false); err != nil {
				w.pending = 0 // the next look reads the records
			}
			return true
		}
	}
	recs, err := w.records(ctx)
	if errors.Is(err, errNoWakeStream) {
		// The stream is gone (deleted; a server restarted without it):
		// the log, from the head of the baseline, will say.
		w.byLog = true
		return w.missedInLog(ctx)
	}
	if err != nil {
		return true
	}
	slept := time.Since(w.checked) > wakeRecordAge/2
	w.checked = time.Now()
	if !slept && slices.Equal(recs, w.recs) {
		return false
	}
	hctx, cancel := w.s.bound(ctx)
	head, err := w.s.Head(hctx, w.run)
	cancel()
	if err == nil {
		// (else the records stay as they were: the next look finds
		// them changed again.)
		w.recs, w.head, w.pending = recs, head, head+1
		w.byLog = !judged(recs)
	}
	return true
}

// concerns reports whether e concerns one of the waiter's participants.
func (w *wakeWaiter) concerns(e *events.Event) bool {
	for _, p := range state.Concerns(e) {
		if slices.Contains(w.participants, p) {
			return true
		}
	}
	return false
}

// missedInLog is missed on a server without WakeStream: it reads the
// events appended since the last look (each event once over the
// waiter's life; one message get, answered "none", when the log has
// not grown) and reports whether one concerns the waiter's
// participants. A look that fails says yes.
func (w *wakeWaiter) missedInLog(ctx context.Context) bool {
	found := false
	err := w.s.Read(ctx, w.run, w.head, func(e *events.Event) error {
		w.head = e.Seq
		if w.concerns(e) {
			found = true
			return events.ErrStopScan
		}
		return nil
	})
	return found || (err != nil && !errors.Is(err, events.ErrStopScan))
}

// Close implements store.Waiter.
func (w *wakeWaiter) Close() error {
	for _, sub := range w.subs {
		sub.Unsubscribe()
	}
	w.s.waiters.remove(w)
	return nil
}

// waiterSet is a Store's wake-up waiters, poked all at once after a
// reconnection (core NATS messages sent meanwhile are lost).
type waiterSet struct {
	mu sync.Mutex
	m  map[*wakeWaiter]bool
}

func (ws *waiterSet) add(w *wakeWaiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.m == nil {
		ws.m = map[*wakeWaiter]bool{}
	}
	ws.m[w] = true
}

func (ws *waiterSet) remove(w *wakeWaiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.m, w)
}

func (ws *waiterSet) pokeAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.m {
		w.poke()
	}
}

// quietHeadroom is how much the heap may grow during a quiet wait
// (Options.QuietWaits) before a collection runs.
const quietHeadroom = 32 << 20

// quiet counts the process's quiet waits under way, and holds the
// collector's settings from before the first.
var quiet struct {
	mu             sync.Mutex
	n              int
	percent, limit int64
}

// quietBegin turns the garbage collector's schedule off for a quiet
// wait (Options.QuietWaits): no collection as the heap grows by GOGC,
// none every two minutes, one only when the memory the runtime holds
// grows quietHeadroom past what it holds now (a memory limit, which
// keeps a process that does allocate meanwhile bounded). The function
// it returns ends the wait; the last wait to end restores the settings.
func quietBegin() (end func()) {
	quiet.mu.Lock()
	defer quiet.mu.Unlock()
	if quiet.n++; quiet.n == 1 {
		sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(sample)
		held := int64(sample[0].Value.Uint64() - sample[1].Value.Uint64())
		quiet.limit = debug.SetMemoryLimit(-1)
		debug.SetMemoryLimit(min(quiet.limit, held+quietHeadroom))
		quiet.percent = int64(debug.SetGCPercent(-1))
	}
	return func() {
		quiet.mu.Lock()
		defer quiet.mu.Unlock()
		if quiet.n--; quiet.n == 0 {
			debug.SetGCPercent(int(quiet.percent))
			debug.SetMemoryLimit(quiet.limit)
		}
	}
}
