//go:build unix

package file

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
)

// Wake-ups (docs/files.md, Wake-ups). A waiter for some participants of a
// run makes a FIFO of its own, opens it for reading and writing (so that
// it never reads an end of file, and its reads block until a byte comes),
// and links it as wake/<participant>/<pid>-<random> for each participant.
// A writer, once the events of a commit are in the log, lists
// wake/<participant>/ of each participant the events concern and writes
// one byte to each FIFO there, without blocking: a full FIFO already has
// a wake-up waiting. The kernel wakes exactly the processes poked; no
// inotify instance is used (fs.inotify.max_user_instances does not bound
// how many wait), and an idle waiter costs nothing but its rescan.
//
// The names appear after their FIFO is open, so a writer that finds a
// name finds a reader; a FIFO without one (its waiter was killed) refuses
// to open (ENXIO), and the writer that meets it removes it. So do the
// next waiter for the same participant (in the directories it links
// into) and crew repair (in all of wake/): a killed waiter's names do
// not wait for a poke to go.
//
// Why no waiter misses its event: the waiter's names are in place before
// Watch returns, and its owner reads the log after that; a writer pokes
// after its events are written. Either the writer lists the name and
// pokes, or it listed the directory before the name appeared, and then
// its events were written before the owner's first read, which sees
// them. A writer that crashes between the log's fsync and its pokes
// leaves the events unprojected, and the next writer, which projects
// them, pokes for them too (tail.Project). The rest is the rescan's:
// every wakeRescan (the first one after a random part of it), the
// waiter stats events.jsonl and, when it grew, reads only the new bytes
// and wakes its owner when any line names one of its participants.

// wakeRescan is the safety-net rescan's period, and so the bound on how
// late a lost wake-up is found: only a writer killed between its fsync
// and its pokes loses one, and then only until the next commit in the
// run, whose writer pokes for the events it catches up. The rescan is
// what an idle waiter costs: each one wakes a blocked Go process (the
// timer's thread, sysmon, a spinning thread), 0.2–0.9 ms of CPU on a
// 2-core VM, more the longer it slept. A thousand waiters rescanning
// every 60 s so use about 0.01 CPU-second a second; every 30 s, as
// before, 0.02; doubling from 1 s, young waiters used 0.035
// (docs/performance.md, idle waiters). A young waiter does not rescan
// sooner: it has just read the log, and a later commit's poke is no
// likelier lost early in a wait than late. Its first rescan comes after a
// random time between half the period and the whole, so that waiters
// started together (a fan-out) do not all wake at the same moment ever
// after.
var wakeRescan = 60 * time.Second // a variable for the tests of a lost wake-up

const (
	// wakeFallback is the period of a waiter whose FIFO cannot be read
	// (not expected): it wakes its owner every time, as a watch without
	// notifications does (events.Rescan).
	wakeFallback = time.Second
	// wakeReadMax caps the new bytes a rescan reads: a log that grew more
	// wakes the owner, who reads it anyway.
	wakeReadMax = 4 << 20
	// wakeChunk is how much of the new bytes a rescan reads at a time.
	wakeChunk = 32 << 10
)

// fifoWaiter is a Watch for participants: a FIFO of its own under wake/.
type fifoWaiter struct {
	f      *os.File
	names  []string      // its links under wake/
	log    string        // events.jsonl
	off    int64         // how far the rescan has looked
	any    bool          // a participant is state.Leader: any growth wakes
	needle [][]byte      // `"participant"` for each task participant
	chunk  []byte        // the rescan's buffer (wakeChunk bytes), once it read
	every  time.Duration // the rescan's period: wakeRescan (tests set less)
	next   time.Time     // when the next rescan is due
	buf    [64]byte
}

func (l *Log) watchFIFO(participants []string) (store.Waiter, error) {
	dir := l.WakeDir()
	if err := mkdir(dir, l.store.Perm); err != nil {
		return nil, err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	name := fmt.Sprintf("%d-%s", os.Getpid(), hex.EncodeToString(rnd[:]))
	tmp := filepath.Join(dir, ".tmp-"+name)
	if err := unix.Mkfifo(tmp, uint32(l.store.Perm.File.Perm())); err != nil {
		return nil, err
	}
	defer os.Remove(tmp)
	os.Chmod(tmp, l.store.Perm.File) // the documented mode, whatever the umask (docs/files.md, Permissions)
	f, err := os.OpenFile(tmp, os.O_RDWR|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	w := &fifoWaiter{f: f, log: l.EventsPath(), every: wakeRescan}
	w.next = store.FirstRescan(w.every)
	if fi, err := os.Stat(w.log); err == nil {
		w.off = fi.Size()
	}
	for _, p := range participants {
		if p == state.Leader {
			w.any = true
		} else {
			w.needle = append(w.needle, []byte(`"`+p+`"`))
		}
		pd := filepath.Join(dir, p)
		if err := mkdir(pd, l.store.Perm); err != nil {
			w.Close()
			return nil, err
		}
		l.tidyWakeOf(p)
		link := filepath.Join(pd, name)
		if err := os.Link(tmp, link); err != nil {
			w.Close()
			return nil, err
		}
		w.names = append(w.names, link)
	}
	return w, nil
}

// Wait implements store.Waiter: it returns when the FIFO was poked, or
// a rescan found new lines naming a participant, or with ctx's error.
// The rescans keep their period across Waits: a poke does not bring the
// next one sooner (the bound is the period's, from any moment).
func (w *fifoWaiter) Wait(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { w.f.SetReadDeadline(time.Now()) })
	defer stop()
	for {
		w.f.SetReadDeadline(w.next)
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := w.f.Read(w.buf[:])
		switch {
		case n > 0:
			return nil
		case errors.Is(err, os.ErrDeadlineExceeded):
			if err := ctx.Err(); err != nil {
				return err
			}
			if now := time.Now(); !now.Before(w.next) {
				w.next = now.Add(w.every)
				if w.grown() {
					return nil
				}
			}
		default:
			// Not expected of a FIFO open at both ends: sleep and wake,
			// as a watch without notifications does.
			t := time.NewTimer(wakeFallback)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// grown reports whether events.jsonl has new lines since the last rescan
// that may concern the waiter (any new line for the leader; for a task,
// one naming it: every event that concerns a task names it), reading
// only the new bytes, wakeChunk at a time into a buffer the waiter keeps.
// A buffer of their size, made at each rescan (up to wakeReadMax, in
// each of a thousand waiters), cost more: a first rescan after 420 KB of
// others' messages took 1.0–1.2 ms of CPU against 1.3–1.5 (paired, 50
// waiters each, loaded machine).
func (w *fifoWaiter) grown() bool {
	fi, err := os.Stat(w.log)
	if err != nil {
		return true
	}
	size := fi.Size()
	switch {
	case size == w.off:
		return false
	case size < w.off: // cut short (a repair): read again
		w.off = size
		return true
	case w.any || size-w.off > wakeReadMax:
		w.off = size
		return true
	}
	f, err := os.Open(w.log)
	if err != nil {
		return true
	}
	defer f.Close()
	if w.chunk == nil {
		w.chunk = make([]byte, wakeChunk)
	}
	// Only complete lines are searched: an unfinished one is read again
	// next time. The last newline is looked for from the end back.
	end := size
	for end > w.off {
		lo := max(w.off, end-wakeChunk)
		if n, _ := f.ReadAt(w.chunk[:end-lo], lo); n < int(end-lo) {
			return true // cut meanwhile, or unreadable: its owner reads it
		}
		if i := bytes.LastIndexByte(w.chunk[:end-lo], '\n'); i >= 0 {
			end = lo + int64(i) + 1
			break
		}
		end = lo
	}
	// Each chunk is searched with the end of the one before it (the
	// longest needle but a byte), so that a name cut in two is found.
	carry := 0
	for _, nd := range w.needle {
		carry = max(carry, len(nd)-1)
	}
	found := false
	for keep, at := 0, w.off; at < end && !found; {
		n := int(min(int64(wakeChunk-keep), end-at))
		if k, _ := f.ReadAt(w.chunk[keep:keep+n], at); k < n {
			return true
		}
		b := w.chunk[:keep+n]
		at += int64(n)
		for _, nd := range w.needle {
			found = found || bytes.Contains(b, nd)
		}
		keep = min(carry, len(b))
		copy(w.chunk, b[len(b)-keep:])
	}
	w.off = end
	return found
}

// Close implements store.Waiter: the names go first, so that no writer
// opens the FIFO after it is closed.
func (w *fifoWaiter) Close() error {
	for _, n := range w.names {
		os.Remove(n)
	}
	return w.f.Close()
}

// openWake opens wake/ (participant "") or wake/<participant>/ for the
// *at calls of a poke or a tidy, refusing a symbolic link in place of
// either (O_NOFOLLOW): crew writes to and removes FIFOs in its own
// directories only, never through a link to another (docs/files.md,
// Wake-ups). Waiters never link there: mkdir refuses a link.
func (l *Log) openWake(participant string) (*os.File, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open(l.WakeDir(), flags, 0)
	if err != nil {
		return nil, err
	}
	if participant != "" {
		sub, err := unix.Openat(fd, participant, flags, 0)
		unix.Close(fd)
		if err != nil {
			return nil, err
		}
		fd = sub
	}
	return os.NewFile(uintptr(fd), filepath.Join(l.WakeDir(), participant)), nil
}

// tidyWake removes from d, wake/ or a participant's directory under it
// (openWake), the FIFOs no process reads any more, left by waiters killed
// before they could remove their names: a FIFO without a reader refuses
// to open for writing (ENXIO). A name appears only once its FIFO is open
// (see above), so one that refuses is stale; a FIFO still being made,
// under a hidden name, is left alone unless the process in its name is
// gone. It returns how many it removed.
func tidyWake(d *os.File) int {
	ents, err := d.ReadDir(-1)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		name := e.Name()
		if e.Type() != fs.ModeNamedPipe {
			continue
		}
		if hidden, ok := strings.CutPrefix(name, ".tmp-"); ok {
			pid, _, _ := strings.Cut(hidden, "-")
			if k, err := strconv.Atoi(pid); err != nil || unix.Kill(k, 0) != unix.ESRCH {
				continue // its maker may still be at work
			}
		} else if strings.HasPrefix(name, ".") {
			continue
		}
		fd, err := unix.Openat(int(d.Fd()), name, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd) // a live waiter: nothing written, nothing to wake
			continue
		}
		if errors.Is(err, unix.ENXIO) && unix.Unlinkat(int(d.Fd()), name, 0) == nil {
			n++
		}
	}
	return n
}

// tidyWakeOf is tidyWake in wake/<participant>/.
func (l *Log) tidyWakeOf(participant string) {
	if d, err := l.openWake(participant); err == nil {
		tidyWake(d)
		d.Close()
	}
}

// removeStaleWakes is repair's tidying of wake/: tidyWake in the
// directory itself (hidden FIFOs of waiters killed while linking) and
// in each participant's. A link in place of either is left alone. It
// returns how many FIFOs it removed.
func (l *Log) removeStaleWakes() int {
	d, err := l.openWake("")
	if err != nil {
		return 0
	}
	defer d.Close()
	n := tidyWake(d)
	d.Seek(0, io.SeekStart)
	ents, _ := d.ReadDir(-1)
	for _, e := range ents {
		if e.IsDir() { // a link is no directory here (its type is the link's)
			if sub, err := l.openWake(e.Name()); err == nil {
				n += tidyWake(sub)
				sub.Close()
			}
		}
	}
	return n
}

// poke writes a byte, without blocking, to each FIFO in
// wake/<participant>/, and removes those that have no reader any more.
func (l *Log) poke(participant string) {
	d, err := l.openWake(participant)
	if err != nil {
		return // no one ever waited for participant (or not a directory of crew's)
	}
	defer d.Close()
	ents, _ := d.ReadDir(-1)
	for _, e := range ents {
		if e.Type() != fs.ModeNamedPipe || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		fd, err := unix.Openat(int(d.Fd()), e.Name(), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENXIO) {
			unix.Unlinkat(int(d.Fd()), e.Name(), 0) // its waiter is gone
			continue
		}
		if err != nil {
			continue
		}
		unix.Write(fd, []byte{1}) // EAGAIN: full, a wake-up is waiting already
		unix.Close(fd)
	}
}
