package nats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/crew-dev/crew"
)

// LockBucket is the JetStream key-value bucket of crew's locks on a
// server. Its one key, agents, is held by a creator of a run or a task
// from its check that no agent is both a leader and a task's agent
// (docs/concepts.md, Reserved names) until what it creates is committed
// (store.Store.LockAgents): the value is the holder's token. Every entry
// expires lockTTL after it was written (the bucket's maximum age), so a
// holder renews its entry while it holds the lock, and one that died
// (kill -9, its machine lost) leaves it to expire.
const LockBucket = "CREW_LOCKS"

// lockTTL is how long a lock outlives its holder's last renewal; a holder
// renews it every lockTTL/3. A variable for tests, which shorten it
// before the bucket is made.
var lockTTL = 10 * time.Second

// agentsKey is LockBucket's key of the agents lock.
const agentsKey = "agents"

// locks returns LockBucket, creating it if the server has none.
func (s *Store) locks(ctx context.Context) (jetstream.KeyValue, error) {
	s.mu.Lock()
	kv := s.lockKV
	s.mu.Unlock()
	if kv != nil {
		return kv, nil
	}
	kv, err := s.keyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      LockBucket,
		Description: "crew: locks of creators of runs and tasks, each expiring unless its holder renews it",
		History:     1,
		TTL:         lockTTL,
		Storage:     jetstream.FileStorage,
		Replicas:    s.opts.Replicas,
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.lockKV = kv
	s.mu.Unlock()
	return kv, nil
}

// LockAgents implements store.Store: it creates the key agents of
// LockBucket with a token of its own, which the server does for one
// creator at a time (a create is refused while the key exists), and
// while another holds it, tries again. Until unlock, it renews the entry
// every lockTTL/3 (an update on the revision it last wrote); unlock
// deletes it on that revision, so never a later holder's. A lock still
// held after lockTTL and Options.RetryFor (its holder hung, or renews it
// from across a partition) is crew.ErrTimeout; a server that cannot be
// asked, the store's error.
func (s *Store) LockAgents() (unlock func(), err error) {
	ctx := context.Background()
	token := []byte(nuid.Next())
	var rev uint64
	held := func(err error) bool { return errors.Is(err, jetstream.ErrKeyExists) || kvAnswer(err) }
	ttl := lockTTL // read here, not by the renewals: a test sets it
	deadline := time.Now().Add(ttl + s.opts.RetryFor)
	wait := 5 * time.Millisecond
	for {
		err := s.retry(ctx, held, func(rctx context.Context) error {
			kv, err := s.locks(rctx)
			if err != nil {
				return err
			}
			rev, err = kv.Create(rctx, agentsKey, token)
			if errors.Is(err, jetstream.ErrKeyExists) {
				// Perhaps this very create, tried again after its answer
				// was lost.
				if e, gerr := kv.Get(rctx, agentsKey); gerr == nil && string(e.Value()) == string(token) {
					rev, err = e.Revision(), nil
				}
			}
			return err
		})
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("take the agents lock (%s:%s) on NATS at %s: %w", LockBucket, agentsKey, s.url, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the agents lock (%s:%s) on NATS at %s is still held by another creator of runs or tasks: %w", LockBucket, agentsKey, s.url, crew.ErrTimeout)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // the renewals; unlock reads rev once they have stopped
		defer close(done)
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			rctx, cancel := s.bound(ctx)
			if kv, err := s.locks(rctx); err == nil {
				if r, err := kv.Update(rctx, agentsKey, token, rev); err == nil {
					rev = r
				}
			}
			cancel()
		}
	}()
	return func() {
		close(stop)
		<-done
		rctx, cancel := s.bound(ctx)
		defer cancel()
		if kv, err := s.locks(rctx); err == nil {
			kv.Delete(rctx, agentsKey, jetstream.LastRevision(rev)) // a failure leaves it to expire
		}
	}, nil
}
