package file

import (
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
)

// Watch implements store.Log. Without participants it watches the whole
// run with events.Watch (fsnotify on events.jsonl and the run directory,
// and a rescan every events.Rescan): every commit wakes it. With
// participants (task ids, state.Leader) it wakes only for the events that
// concern one of them (state.Concerns), through a wake-up FIFO of its own
// under wake/ (wake_unix.go; docs/files.md, Wake-ups), which the writer
// of such an event pokes: a commit wakes its own waiters, not every
// process waiting on the run. Where FIFOs cannot be made it falls back
// to the whole-run watch.
func (l *Log) Watch(participants ...string) store.Waiter {
	if len(participants) > 0 {
		if w, err := l.watchFIFO(participants); err == nil {
			return w
		}
	}
	return events.Watch(l.EventsPath(), l.dir)
}

// WakeDir is the run's directory of wake-up FIFOs: wake/<participant>/.
func (l *Log) WakeDir() string { return l.path(wakeDir) }

const wakeDir = "wake"

// notify pokes the waiters of the participants evs concern (state.Concerns):
// after evs are in the log, so that a waiter woken reads them. Best
// effort: a waiter whose poke is lost finds the events at its rescan.
func (l *Log) notify(evs []*events.Event) {
	if len(evs) == 0 {
		return
	}
	seen := map[string]bool{}
	for _, e := range evs {
		for _, p := range state.Concerns(e) {
			if !seen[p] {
				seen[p] = true
				l.poke(p)
			}
		}
	}
}
