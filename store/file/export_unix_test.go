//go:build unix

package file

import "time"

// SetWakeRescan sets the period of the wake-up rescans of the waiters
// made from now on, until the test ends.
func SetWakeRescan(t interface{ Cleanup(func()) }, d time.Duration) {
	old := wakeRescan
	wakeRescan = d
	t.Cleanup(func() { wakeRescan = old })
}
