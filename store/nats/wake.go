package nats

import (
	"context"
	"fmt"
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
// its last seq (one request, no event read) and wakes its owner when the
// log grew. Only a wake-up starts the period again.
const (
	wakeRescan    = 5 * time.Second
	wakeRescanMax = 60 * time.Second
)

// WakeSubject is the subject of run's wake-ups for participant (a task id
// or state.Leader): crew.wake.<run>.<participant>.
func WakeSubject(run, participant string) string {
	return "crew.wake." + run + "." + participant
}

// notify publishes the wake-ups of evs, each participant once. The
// messages leave with the connection's next flush (at once, in the
// client's flusher), not waited for.
func (s *Store) notify(run string, evs []*events.Event) {
	seen := map[string]bool{}
	for _, e := range evs {
		for _, p := range state.Concerns(e) {
			if !seen[p] {
				seen[p] = true
				s.nc.Publish(WakeSubject(run, p), nil)
			}
		}
	}
}

// wakeWaiter is a Watch for participants.
type wakeWaiter struct {
	s      *Store
	run    string
	subs   []*nats.Subscription
	wake   chan struct{}
	head   int64
	rescan time.Duration
}

// watchFor subscribes to the wake-ups of participants of run; the
// subscriptions are on the server (flushed) before it returns.
func (s *Store) watchFor(ctx context.Context, run string, participants []string) (store.Waiter, error) {
	head, err := s.Head(ctx, run)
	if err != nil {
		return nil, err
	}
	w := &wakeWaiter{s: s, run: run, head: head, wake: make(chan struct{}, 1), rescan: wakeRescan}
	for _, p := range participants {
		sub, err := s.nc.Subscribe(WakeSubject(run, p), func(*nats.Msg) { w.poke() })
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
		hctx, cancel := w.s.bound(ctx)
		head, err := w.s.Head(hctx, w.run)
		cancel()
		// The period grows whatever the rescan finds: in a busy run the
		// log grows between any two rescans, and a wake for that alone
		// would have every waiter read the log every wakeRescan (a herd,
		// slowed down). Only a wake-up resets it.
		w.rescan = min(2*w.rescan, wakeRescanMax)
		if err != nil || head != w.head {
			if err == nil {
				w.head = head
			}
			return nil
		}
	}
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
