//go:build unix

package file

import (
	"time"

	"github.com/crew-dev/crew/store"
)

// SetWakeRescan sets the period of the wake-up rescans of the waiters
// made from now on, until the test ends.
func SetWakeRescan(t interface{ Cleanup(func()) }, d time.Duration) {
	old := wakeRescan
	wakeRescan = d
	t.Cleanup(func() { wakeRescan = old })
}

// WakeDue is when the next rescan of w, a waiter for participants, is
// due.
func WakeDue(w store.Waiter) time.Time { return w.(*fifoWaiter).next }

// WakeRescan is the rescans' period.
func WakeRescan() time.Duration { return wakeRescan }
