package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

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
// rescan covers the rest: every wakeRescan, doubling to wakeRescanMax
// whatever it finds (a wake of an idle process costs about 0.3 ms of
// CPU, and its request the server's time), a waiter asks the stream for
// its last seq (one request) and, when the log grew, reads the events
// it has not looked at yet, each once, and wakes its owner only if one
// of them concerns one of its participants (state.Concerns, the rule
// writers publish by). Waking the owner whenever the log grew would have
// it read the log after its question at every rescan: in a run of a
// thousand waiters whose log grows, that was most of their idle CPU.
// Only a wake-up starts the period again.
const (
	wakeRescan    = 5 * time.Second
	wakeRescanMax = 60 * time.Second
)

// WakeSubject is the subject of run's wake-ups for participant (a task id
// or state.Leader): crew.wake.<run>.<participant>.
func WakeSubject(run, participant string) string {
	return "crew.wake." + run + "." + participant
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

// wakeWaiter is a Watch for participants.
type wakeWaiter struct {
	s            *Store
	run          string
	participants []string
	subs         []*nats.Subscription
	wake         chan struct{}
	head         int64 // the rescans have looked at the events up to here
	rescan       time.Duration

	mu   sync.Mutex
	hint int64 // the lowest seq the wake-ups named since the last Hint (0: none)
}

var _ store.Hinter = (*wakeWaiter)(nil)

// watchFor subscribes to the wake-ups of participants of run; the
// subscriptions are on the server (flushed) before it returns.
func (s *Store) watchFor(ctx context.Context, run string, participants []string) (store.Waiter, error) {
	head, err := s.Head(ctx, run)
	if err != nil {
		return nil, err
	}
	w := &wakeWaiter{s: s, run: run, participants: participants, head: head, wake: make(chan struct{}, 1), rescan: wakeRescan}
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
	s.waiters.add(w)
	return w, nil
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

// missed reports whether the events appended since the last rescan hold
// one that concerns the waiter's participants, reading them (each event
// once over the waiter's life, and none when the log has not grown). A
// rescan that fails says yes: its owner looks for itself.
func (w *wakeWaiter) missed(ctx context.Context) bool {
	hctx, cancel := w.s.bound(ctx)
	defer cancel()
	head, err := w.s.Head(hctx, w.run)
	if err != nil || head < w.head {
		return true
	}
	found := false
	err = w.s.Read(ctx, w.run, w.head, func(e *events.Event) error {
		w.head = e.Seq
		for _, p := range state.Concerns(e) {
			if slices.Contains(w.participants, p) {
				found = true
				return events.ErrStopScan
			}
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
