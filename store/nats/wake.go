package nats

import (
	"context"
	"encoding/json"
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
// has), or when a writer dies between its append and its publish. The
// rescan covers the rest, every wakeRescan, doubling to wakeRescanMax
// whatever it finds (only a wake-up starts the period again). It reads
// no event: before its append, a writer publishes to DueSubject of each
// participant the event concerns, and the stream WakeStream keeps the
// last such record of each (in memory); a rescan asks for its
// participants' records (one small request each) and wakes its owner
// only when one changed since it last looked (waiter.missed says why
// that misses nothing). On a server without the stream (made by crew
// run create) the rescan reads the log instead, as before: it asks the
// stream for its last seq and reads the events it has not looked at
// yet, each once, waking its owner for one that concerns it.
//
// Each wake of an idle waiter costs about 0.3 ms of CPU on the 2-core
// machine of the benches (the Go runtime's own, whatever it does), so
// the schedule, not only what a rescan does, sets an idle waiter's cost.
const (
	wakeRescan    = 5 * time.Second
	wakeRescanMax = 60 * time.Second
)

// WakeSubject is the subject of run's wake-ups for participant (a task id
// or state.Leader): crew.wake.<run>.<participant>.
func WakeSubject(run, participant string) string {
	return "crew.wake." + run + "." + participant
}

// DueSubject is the subject of participant's wake records in run
// (WakeStream): crew.wake.<run>.<participant>.due. A writer publishes
// one, holding the seq it is about to append in decimal, before it
// appends an event that concerns participant. Waiters subscribe to
// WakeSubject only, which it does not match.
func DueSubject(run, participant string) string {
	return WakeSubject(run, participant) + ".due"
}

// WakeStream is the stream that keeps the last wake record of each run
// participant (DueSubject): in memory, one message per subject, for a
// day at most. It is a hint like the wake-ups, never the source of
// truth; a waiter that cannot read it reads the log.
const WakeStream = "CREW_WAKES"

// wakeRecordAge is how long WakeStream keeps a record. A waiter whose
// rescans were further apart than half of it (its machine slept) wakes
// its owner rather than trust a record that may have come and gone.
const wakeRecordAge = 24 * time.Hour

// ensureWakeStream creates WakeStream if the server has none. A failure
// (no right to create streams, a server short of memory) leaves the
// waiters to read the log at their rescans.
func (s *Store) ensureWakeStream(ctx context.Context) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	s.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:              WakeStream,
		Description:       "crew: the last wake record of each run participant, for the waiters' rescans",
		Subjects:          []string{DueSubject("*", "*")},
		Storage:           jetstream.MemoryStorage,
		Replicas:          s.opts.Replicas,
		MaxMsgsPerSubject: 1,
		MaxAge:            wakeRecordAge,
		MaxBytes:          64 << 20,
		Discard:           jetstream.DiscardOld,
	})
}

// announce publishes the wake records of ev (DueSubject of each
// participant it concerns), before ev is appended: with the connection's
// next flush, which the append's request is, so the server has them
// before it stores ev.
func (s *Store) announce(ev *events.Event) {
	data := strconv.AppendInt(nil, ev.Seq, 10)
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

// wakeRecord is a participant's last wake record as a rescan saw it: its
// message's seq in WakeStream and time (a server restarted with an empty
// stream numbers from 1 again); zero when there was none.
type wakeRecord struct {
	seq  uint64
	time string
}

// errNoWakeStream: the server has no WakeStream.
var errNoWakeStream = errors.New("no wake stream")

// wakeRecordOf returns participant's last wake record in run.
func (s *Store) wakeRecordOf(ctx context.Context, run, participant string) (wakeRecord, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": DueSubject(run, participant)})
	m, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+WakeStream, req)
	if errors.Is(err, nats.ErrNoResponders) {
		return wakeRecord{}, errNoWakeStream // no JetStream answering for it
	}
	if err != nil {
		return wakeRecord{}, err
	}
	var resp struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Time string `json:"time"`
		} `json:"message"`
		Error *struct {
			Code    int    `json:"code"`
			ErrCode int    `json:"err_code"`
			Desc    string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return wakeRecord{}, fmt.Errorf("wake record of %s in run %s: %w", participant, run, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == int(jetstream.JSErrCodeMessageNotFound):
		return wakeRecord{}, nil
	case resp.Error != nil && resp.Error.ErrCode == int(jetstream.JSErrCodeStreamNotFound):
		return wakeRecord{}, errNoWakeStream
	case resp.Error != nil:
		return wakeRecord{}, fmt.Errorf("wake record of %s in run %s: %s (%d)", participant, run, resp.Error.Desc, resp.Error.ErrCode)
	case resp.Message == nil:
		return wakeRecord{}, fmt.Errorf("wake record of %s in run %s: an empty answer", participant, run)
	}
	return wakeRecord{seq: resp.Message.Seq, time: resp.Message.Time}, nil
}

// wakeWaiter is a Watch for participants.
type wakeWaiter struct {
	s            *Store
	run          string
	participants []string
	subs         []*nats.Subscription
	wake         chan struct{}
	rescan       time.Duration

	// byLog: the server has no WakeStream, and rescans read the log; head
	// is how far they have looked (and where a waiter that finds the
	// stream gone starts).
	byLog bool
	head  int64
	// recs are the participants' wake records as last seen; pending is a
	// seq at which an event announced before then may still be appended
	// (0: none); checked is when the records were last read.
	recs    []wakeRecord
	pending int64
	checked time.Time

	mu   sync.Mutex
	hint int64 // the lowest seq the wake-ups named since the last Hint (0: none)
}

var _ store.Hinter = (*wakeWaiter)(nil)

// watchFor subscribes to the wake-ups of participants of run; the
// subscriptions are on the server (flushed), and the participants' wake
// records and the log's head read, before it returns: its caller reads
// the state after.
func (s *Store) watchFor(ctx context.Context, run string, participants []string) (store.Waiter, error) {
	w := &wakeWaiter{s: s, run: run, participants: participants, wake: make(chan struct{}, 1), rescan: wakeRescan}
	for _, p := range participants {
		sub, err := s.nc.Subscribe(WakeSubject(run, p), func(m *nats.Msg) {
			if seq, err := strconv.ParseInt(string(m.Data), 10, 64); err == nil && seq > 0 {
				w.mu.Lock()
				if w.hint == 0 || seq < w.hint {
					w.hint = seq
				}
				w.mu.Unlock()
			}
			w.poke()
		})
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("watch run %s on NATS at %s: %w", run, s.url, err)
		}
		w.subs = append(w.subs, sub)
	}
	if err := s.nc.FlushWithContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("watch run %s on NATS at %s: %w", run, s.url, err)
	}
	// The records first, then the head (waiter.missed).
	// Records that cannot be read (no WakeStream) leave the rescans to
	// read the log.
	recs, err := w.records(ctx)
	head, herr := s.Head(ctx, run)
	if herr != nil {
		w.Close()
		return nil, herr
	}
	w.head, w.byLog, w.recs, w.checked = head, err != nil, recs, time.Now()
	w.pending = head + 1
	s.waiters.add(w)
	return w, nil
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

// Wait implements store.Waiter.
func (w *wakeWaiter) Wait(ctx context.Context) error {
	if w.s.opts.QuietWaits {
		defer quietBegin()()
	}
	for {
		t := time.NewTimer(w.rescan)
		select {
		case <-w.wake:
			t.Stop()
			w.rescan = wakeRescan
			return nil
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		// The period grows whatever the rescan finds: in a busy run the
		// log grows between any two rescans. Only a wake-up resets it.
		w.rescan = min(2*w.rescan, wakeRescanMax)
		if w.missed(ctx) {
			return nil
		}
	}
}

// missed reports whether an event that concerns the waiter's
// participants may have been appended since its owner last read (since
// the Watch, or since missed last said yes), its wake-up lost. A rescan
// that fails says yes: its owner looks for itself.
//
// It reads the participants' wake records (one small request each) and
// says yes when one changed since the last look; it then reads the
// log's head H, as the owner reads the log after it returns. Why that
// misses nothing: the writer of an event at seq M that concerns p
// published p's record, then appended. If it did so after the owner's
// last read (which came after this waiter read the records and then
// the head H), then either it loaded the log at H or later, after the
// records were read, so its record was stored after the look and the
// next look sees it changed; or it loaded the log before H, and its
// append can only have landed at H+1, the first seq after H (one at M
// ≤ H was seen by the owner, or failed, and a writer that tries again
// publishes again). So H+1 is kept pending: once the log holds it,
// that one event is read, and the owner woken if it concerns it. On a
// server without WakeStream, it reads the log (missedInLog).
func (w *wakeWaiter) missed(ctx context.Context) bool {
	if w.byLog {
		return w.missedInLog(ctx)
	}
	recs, err := w.records(ctx)
	if errors.Is(err, errNoWakeStream) {
		// The stream is gone (deleted; a server restarted without it):
		// the log, from the head at the Watch, will say.
		w.byLog = true
		return w.missedInLog(ctx)
	}
	if err != nil {
		return true
	}
	slept := time.Since(w.checked) > wakeRecordAge/2
	w.checked = time.Now()
	if slept || !slices.Equal(recs, w.recs) {
		hctx, cancel := w.s.bound(ctx)
		head, err := w.s.Head(hctx, w.run)
		cancel()
		if err == nil {
			// (else the records stay as they were: the next look finds
			// them changed again.)
			w.recs, w.pending = recs, head+1
		}
		return true
	}
	if w.pending == 0 {
		return false
	}
	// An append announced before the last look may have landed at
	// pending since: one event to read, once the log holds it.
	hctx, cancel := w.s.bound(ctx)
	defer cancel()
	e, err := w.s.Event(hctx, w.run, w.pending)
	switch {
	case errors.Is(err, crew.ErrNotFound):
		return false // not yet
	case err != nil:
		return true
	}
	w.pending = 0
	return w.concerns(e)
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
// events appended since the last rescan (each event once over the
// waiter's life, and none when the log has not grown) and reports
// whether one concerns the waiter's participants. A rescan that fails
// says yes.
func (w *wakeWaiter) missedInLog(ctx context.Context) bool {
	hctx, cancel := w.s.bound(ctx)
	defer cancel()
	head, err := w.s.Head(hctx, w.run)
	if err != nil || head < w.head {
		return true
	}
	found := false
	err = w.s.Read(ctx, w.run, w.head, func(e *events.Event) error {
		w.head = e.Seq
		if w.concerns(e) {
			found = true
			return events.ErrStopScan
		}
		if e.Seq >= head {
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
