package nats

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/crew-dev/crew/internal/natstest"
)

// The agents lock is held by one Store at a time, for as long as its
// holder keeps it (renewed past lockTTL), and a holder that died without
// letting it go (its connection closed) leaves it to expire.
func TestAgentsLock(t *testing.T) {
	defer func(ttl time.Duration) { lockTTL = ttl }(lockTTL)
	lockTTL = time.Second
	srv := natstest.Server(t)
	a, b := testDial(t, srv.ClientURL()), testDial(t, srv.ClientURL())
	unlockA, err := a.LockAgents()
	if err != nil {
		t.Fatal(err)
	}
	var released atomic.Bool
	got := make(chan error)
	go func() {
		unlockB, err := b.LockAgents()
		if err == nil && !released.Load() {
			t.Error("b took the agents lock while a held it")
		}
		if err == nil {
			unlockB()
		}
		got <- err
	}()
	time.Sleep(3 * lockTTL) // b tries meanwhile; a's entry would have expired twice over without renewals
	released.Store(true)
	unlockA()
	if err := <-got; err != nil {
		t.Fatalf("b, after a let the lock go: %v", err)
	}

	dead := testDial(t, srv.ClientURL())
	if _, err := dead.LockAgents(); err != nil {
		t.Fatal(err)
	}
	dead.Close() // dies holding it: no renewal, no unlock
	unlockB, err := b.LockAgents()
	if err != nil {
		t.Fatalf("the lock of a holder that died: %v; want it taken once expired", err)
	}
	unlockB()
}
