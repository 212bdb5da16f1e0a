package events

import (
	"context"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Rescan is how often a Watcher wakes its owner even without a file-system
// notification: the safety net for lost or impossible notifications
// (inotify queue overflow, files replaced by rename, NFS).
const Rescan = time.Second

// Watcher wakes a waiting reader when watched files or directories may have
// changed. Notifications are hints: the owner re-reads and decides; a
// Watcher never says what changed.
type Watcher struct {
	w    *fsnotify.Watcher
	wake chan struct{}
	done chan struct{}
}

// Watch starts watching paths (files or directories) with fsnotify
// (inotify on Linux). If the platform has no notification support, the
// Watcher falls back to waking every Rescan.
func Watch(paths ...string) *Watcher {
	wt := &Watcher{wake: make(chan struct{}, 1), done: make(chan struct{})}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return wt
	}
	for _, p := range paths {
		w.Add(p) // a path that cannot be watched is still rescanned
	}
	wt.w = w
	go wt.loop()
	return wt
}

func (wt *Watcher) loop() {
	for {
		select {
		case _, ok := <-wt.w.Events:
			if !ok {
				return
			}
			wt.poke()
		case _, ok := <-wt.w.Errors:
			if !ok {
				return
			}
			wt.poke() // overflow: something changed, we do not know what
		case <-wt.done:
			return
		}
	}
}

func (wt *Watcher) poke() {
	select {
	case wt.wake <- struct{}{}:
	default:
	}
}

// Wait blocks until a watched path may have changed, Rescan has passed, or
// ctx is done (then it returns ctx.Err()).
func (wt *Watcher) Wait(ctx context.Context) error {
	t := time.NewTimer(Rescan)
	defer t.Stop()
	select {
	case <-wt.wake:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops watching and returns at once. Releasing the notification
// instance finishes in the background: closing an inotify descriptor waits
// for a kernel grace period (tens of milliseconds), which a waiter that has
// its answer must not spend before printing it.
func (wt *Watcher) Close() error {
	close(wt.done)
	if wt.w != nil {
		go wt.w.Close()
	}
	return nil
}
