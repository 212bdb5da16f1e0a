package file

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/internal/jsonl"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
)

// repairData is the Data of a log.repaired event.
type repairData struct {
	Quarantine string   `json:"quarantine,omitempty"`
	Damaged    []string `json:"damaged,omitempty"`
	LostSeqs   []int64  `json:"lostSeqs,omitempty"`
}

// Repair verifies the log and rebuilds every projection from it, under the
// run lock (etcd's wal repair is the model: damaged bytes are kept aside,
// never deleted).
//
// A line that does not decode, or whose seq is out of order, and an
// unterminated last line, are moved byte for byte into
// events.jsonl.quarantine-<time> beside the log. A seq that no readable
// line holds is filled with a log.repaired event naming it, so every later
// seq keeps its number (cursors stay valid) and seq stays dense. If
// anything was wrong, a final log.repaired event names the quarantine file
// and what was lost. The new log is written to a temporary file, fsynced
// and renamed over the old one. Then tasks.json, the mailbox files and the
// mail-tree copies are rebuilt from the log. A healthy log is left
// untouched and only the projections are rebuilt.
func (l *Log) Repair(ctx context.Context) (rep *store.RepairReport, err error) {
	err = l.exclusive(func() error {
		rep, err = l.repair(ctx)
		return err
	})
	return rep, err
}

// fillLimit is the largest seq gap Repair fills with log.repaired events.
// A larger jump (a damaged digit, a hand edit) is closed by renumbering the
// events after it instead, so one bad seq cannot make repair write millions
// of fillers.
const fillLimit = 10000

// repairLine is what Repair's first pass learns about one complete line.
type repairLine struct {
	seq int64 // 0: the line does not decode as an event
}

// repair is Repair, run exclusively. It reads the log twice: the first pass
// decides, from the seqs alone, which lines to keep and how to number them;
// the second writes the repaired log (only when something was wrong) to a
// temporary file, streaming, so memory does not grow with the log.
func (l *Log) repair(ctx context.Context) (*store.RepairReport, error) {
	defer l.dropCache()
	defer l.keep.drop()
	rep := &store.RepairReport{Run: l.manifest.ID, TempRemoved: l.removeTemps(), WakeRemoved: l.removeStaleWakes()}
	if l.badManifest != nil {
		if err := l.rewriteManifest(rep); err != nil {
			return nil, err
		}
	}
	f, err := fsys.OpenNoFollow(l.EventsPath(), os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		// A lost log: start a new one from the manifest.
		if f, err = fsys.OpenFile(l.EventsPath(), os.O_RDWR|os.O_CREATE|os.O_EXCL, l.store.Perm.File); err != nil {
			return nil, err
		}
		rep.Damaged = append(rep.Damaged, "events.jsonl was missing")
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	complete, size, err := jsonl.CompleteSize(f)
	if err != nil {
		return nil, err
	}
	lines, err := readSeqs(f)
	if err != nil {
		return nil, err
	}
	p := decide(lines, rep)
	if !p.dirty(size > complete, rep) {
		rep.Events = p.last
	} else if err := l.rewrite(f, p, rep, complete, size); err != nil {
		return nil, err
	}
	if err := l.rebuild(rep); err != nil {
		return rep, err
	}
	rep.Rebuilt = true
	return rep, nil
}

// rewriteManifest writes manifest.json anew from l.manifest (read from
// the log's run.created by OpenForRepair), after moving the damaged one,
// if any, to manifest.json.quarantine-<time>: written to a temporary
// file, fsynced, renamed into place, and the directory fsynced.
func (l *Log) rewriteManifest(rep *store.RepairReport) error {
	path := l.path("manifest.json")
	what := "manifest.json is missing"
	if _, err := os.Lstat(path); err == nil {
		aside := path + ".quarantine-" + events.Now().Format("20060102T150405.000Z")
		if err := os.Rename(path, aside); err != nil {
			return fmt.Errorf("move the damaged manifest.json aside: %w", err)
		}
		what = "manifest.json was damaged; its bytes moved to " + filepath.Base(aside)
	}
	if err := writeAtomicFunc(path, l.store.Perm.File, true, func(w io.Writer) error {
		_, err := w.Write(manifestFile(l.manifest))
		return err
	}); err != nil {
		return fmt.Errorf("rewrite manifest.json: %w", err)
	}
	rep.Damaged = append(rep.Damaged, what+"; rebuilt from the log's run.created event")
	l.badManifest = nil
	return nil
}

// readSeqs is repair's first pass: the seq of every complete line of f
// (0 for one that does not decode).
func readSeqs(f *os.File) ([]repairLine, error) {
	var lines []repairLine
	rd := jsonl.NewReader(f, 0, 1)
	for {
		line, err := rd.Next()
		if err == io.EOF {
			return lines, nil
		}
		if err != nil {
			return nil, err
		}
		var rl repairLine
		if e, err := events.Decode(line.Data); err == nil {
			rl = repairLine{seq: e.Seq}
		}
		lines = append(lines, rl)
	}
}

// A plan is what repair decided from the seqs alone: keep[i] is the new
// seq of line i, or 0 to quarantine it; fill[i] is how many lost seqs are
// filled just before it.
type plan struct {
	lines       []repairLine
	keep, fill  []int64
	last, shift int64 // the last seq kept; how far later seqs were moved down
}

// decide plans the repaired log, noting seq jumps too large to fill in
// rep.Damaged.
func decide(lines []repairLine, rep *store.RepairReport) *plan {
	p := &plan{lines: lines, keep: make([]int64, len(lines)), fill: make([]int64, len(lines))}
	var unreadable int64
	for i, line := range lines {
		s := line.seq - p.shift
		switch {
		case line.seq == 0:
			unreadable++
			continue
		case s <= p.last:
			continue // a duplicate or out of order: quarantined
		case s > p.last+1 && nextContinues(lines, i, p.last, p.shift):
			continue // this line's seq is the damaged part: the next lines go on from last
		case s > p.last+1:
			gap := s - p.last - 1
			if gap > fillLimit {
				keepGap := min(unreadable, fillLimit)
				p.shift += gap - keepGap
				rep.Damaged = append(rep.Damaged, fmt.Sprintf("line %d: seq jumps from %d to %d; later events renumbered from %d", i+1, p.last, line.seq, p.last+keepGap+1))
				gap = keepGap
			}
			p.fill[i] = gap
			s = p.last + gap + 1
		}
		p.keep[i], p.last, unreadable = s, s, 0
	}
	if len(lines) == 0 && len(rep.Damaged) == 0 {
		rep.Damaged = append(rep.Damaged, "events.jsonl holds no events")
	}
	return p
}

// dirty reports whether the log must be rewritten: a line to drop, a seq
// to fill or renumber, a torn tail, or damage already noted.
func (p *plan) dirty(torn bool, rep *store.RepairReport) bool {
	dirty := len(p.lines) == 0 || p.shift > 0 || torn || len(rep.Damaged) > 0
	for i := range p.lines {
		dirty = dirty || p.keep[i] == 0 || p.fill[i] > 0
	}
	return dirty
}

// rewrite is repair's second pass: it writes the repaired log to a
// temporary file and the damaged bytes to the quarantine file, fsyncs
// both and renames the log into place (then fsyncs the directory).
func (l *Log) rewrite(f *os.File, p *plan, rep *store.RepairReport, complete, size int64) error {
	now := events.Now()
	tmp, err := fsys.CreateTemp(l.dir, ".events.jsonl.tmp-repair-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	w := &repairWriter{l: l, out: bufio.NewWriterSize(fsysWriter{tmp}, 1<<20), rep: rep}
	if err := w.copyLines(f, p); err != nil {
		return err
	}
	if w.seq == 0 { // nothing readable at all: the run begins again from its manifest
		w.seq++
		created := l.filler(w.seq, now)
		if err := w.emit(&created); err != nil {
			return err
		}
	}
	if size > complete {
		rep.TornBytes = size - complete
		tornData := make([]byte, rep.TornBytes)
		if _, err := f.ReadAt(tornData, complete); err != nil {
			return err
		}
		w.quarantine(fmt.Sprintf("unterminated last line, byte %d", complete), tornData)
		rep.Damaged = append(rep.Damaged, fmt.Sprintf("byte %d: unterminated last line of %d bytes", complete, rep.TornBytes))
	}
	if len(w.bad) > 0 {
		rep.Quarantine = l.EventsPath() + ".quarantine-" + now.Format("20060102T150405.000Z")
	}
	if err := w.emitRepaired(now); err != nil {
		return err
	}
	if err := w.out.Flush(); err != nil {
		return fmt.Errorf("rewrite %s: %w", l.EventsPath(), err)
	}
	if err := fsys.SyncFile(tmp); err != nil {
		return fmt.Errorf("rewrite %s: %w", l.EventsPath(), err)
	}
	if err := os.Chmod(tmp.Name(), l.store.Perm.File); err != nil {
		return err
	}
	if rep.Quarantine != "" {
		if err := writeFileSync(rep.Quarantine, w.bad, l.store.Perm.File); err != nil {
			return fmt.Errorf("write quarantine file: %w", err)
		}
	}
	if err := fsys.RenameFile(tmp.Name(), l.EventsPath()); err != nil {
		if rep.Quarantine != "" {
			os.Remove(rep.Quarantine) // the damaged bytes are still in the log
		}
		return fmt.Errorf("rewrite %s: %w", l.EventsPath(), err)
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	rep.Events = w.seq
	return nil
}

// repairWriter writes the repaired log: the lines kept, the fillers of
// lost seqs, and the final log.repaired event; it collects the damaged
// bytes for the quarantine file.
type repairWriter struct {
	l   *Log
	out *bufio.Writer
	rep *store.RepairReport
	bad []byte // the quarantine file's content
	seq int64  // the last seq written
}

func (w *repairWriter) emit(e *events.Event) error {
	line, err := events.Marshal(e)
	if err != nil {
		return err
	}
	_, err = w.out.Write(line)
	return err
}

// quarantine keeps bytes aside, under a comment naming where they were.
func (w *repairWriter) quarantine(where string, data []byte) {
	w.bad = append(w.bad, "# "+where+"\n"...)
	w.bad = append(w.bad, data...)
	w.bad = append(w.bad, '\n')
}

// copyLines copies the lines of f that p keeps, renumbered where p says,
// with the fillers p asks for before them, and quarantines the rest.
func (w *repairWriter) copyLines(f *os.File, p *plan) error {
	rd := jsonl.NewReader(f, 0, 1)
	for i := 0; ; i++ {
		line, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if p.keep[i] == 0 {
			reason := "unreadable event"
			if p.lines[i].seq > 0 {
				reason = fmt.Sprintf("seq %d out of order", p.lines[i].seq)
			}
			w.rep.Damaged = append(w.rep.Damaged, fmt.Sprintf("line %d: %s", i+1, reason))
			w.quarantine(fmt.Sprintf("line %d, byte %d", i+1, line.Offset), line.Data)
			continue
		}
		e, _ := events.Decode(line.Data)
		for n := int64(0); n < p.fill[i]; n++ {
			w.seq++
			filler := w.l.filler(w.seq, e.At)
			if filler.Type == events.LogRepaired {
				w.rep.LostSeqs = append(w.rep.LostSeqs, w.seq)
			}
			if err := w.emit(&filler); err != nil {
				return err
			}
		}
		w.seq++
		if p.keep[i] == p.lines[i].seq {
			if _, err := w.out.Write(append(line.Data, '\n')); err != nil {
				return err
			}
			continue
		}
		e.Seq = p.keep[i] // renumbered
		if e.Message != nil {
			e.Message.Seq = p.keep[i]
		}
		if err := w.emit(&e); err != nil {
			return err
		}
	}
}

// emitRepaired writes the final log.repaired event: it names what was
// lost, with the first few places; the quarantine file keeps every
// damaged byte.
func (w *repairWriter) emitRepaired(now events.Time) error {
	rep := w.rep
	shown := rep.Damaged
	if len(shown) > 20 {
		shown = append(shown[:20:20], fmt.Sprintf("and %d more", len(rep.Damaged)-20))
	}
	lost := rep.LostSeqs
	if len(lost) > 100 {
		lost = lost[:100]
	}
	reason := fmt.Sprintf("%s; %s lost", human.Count(len(rep.Damaged), "damaged place"), human.Count(len(rep.LostSeqs), "seq"))
	d := repairData{Damaged: shown, LostSeqs: lost}
	if rep.Quarantine != "" {
		d.Quarantine = filepath.Base(rep.Quarantine)
		reason += "; damaged bytes moved to " + d.Quarantine
	}
	data, _ := json.Marshal(d)
	w.seq++
	ev := events.Event{Seq: w.seq, At: now, Type: events.LogRepaired, Run: w.l.manifest.ID, Actor: "crew", Reason: reason, Data: data}
	rep.RepairedSeq = w.seq
	return w.emit(&ev)
}

// nextContinues reports whether the first readable line after line i
// carries on the numbering from last (allowing one seq per unreadable line
// in between): then line i's own seq is what is damaged.
func nextContinues(lines []repairLine, i int, last, shift int64) bool {
	var between int64
	for _, l := range lines[i+1:] {
		if l.seq == 0 {
			between++
			continue
		}
		s := l.seq - shift
		return s > last && s <= last+2+between
	}
	return false
}

// filler is the event Repair writes for a lost seq: run.created rebuilt
// from the manifest for seq 1 (a run's log must begin with it), else a
// log.repaired event naming the seq.
func (l *Log) filler(seq int64, at events.Time) events.Event {
	if seq == 1 {
		data, _ := json.Marshal(l.manifest)
		return events.Event{Seq: 1, At: l.manifest.CreatedAt, Type: events.RunCreated, Run: l.manifest.ID, Actor: l.manifest.Leader, Data: data}
	}
	return events.Event{Seq: seq, At: at, Type: events.LogRepaired, Run: l.manifest.ID, Actor: "crew",
		Reason: fmt.Sprintf("seq %d was lost: no readable line held it", seq)}
}

// rebuild derives every projection afresh from the log. The caller holds
// the run lock.
func (l *Log) rebuild(rep *store.RepairReport) error {
	if err := l.removeMark(); err != nil {
		return err
	}
	st := state.New()
	c, err := events.Read(l.EventsPath(), 0)
	if err != nil {
		return err
	}
	defer c.Close()
	var acts []mailbox.Act
	messages := map[string]bool{} // ids of the messages in the log
	err = c.Scan(func(de *events.DamageError) { st.Damage = append(st.Damage, de.Error()) }, func(e *events.Event) error {
		if e.Message != nil {
			messages[e.Message.ID] = true
		}
		effects, _ := st.Apply(e)
		acts = mailbox.AppendActs(acts, effects, false)
		return nil
	})
	if err != nil {
		return err
	}
	st.Offset = c.Offset()
	if err := mkdir(l.path("mailbox"), l.store.Perm); err != nil {
		return err
	}
	for _, file := range mailbox.Files {
		if err := l.rebuildMailbox(file); err != nil { // streamed from the log
			return err
		}
	}
	// Mail-tree copies: delivering again is harmless (same names), and
	// read flags follow the delivery status.
	if err := l.projectTree(acts); err != nil {
		return err
	}
	if rep.CopiesRemoved, err = l.removeStrayCopies(messages); err != nil {
		return err
	}
	if err := l.writeOpenSnapshot(st); err != nil {
		return err
	}
	return l.writeSnapshot(st)
}

// removeStrayCopies removes, from every mailbox of the mail tree, the
// copies of this run's messages that the log does not hold (messages):
// the copy of a message whose event repair quarantined would otherwise
// outlive it. It returns how many it removed. The caller holds the run
// lock, so no copy of a message being committed is in the tree yet.
func (l *Log) removeStrayCopies(messages map[string]bool) (int, error) {
	tree := l.store.MailTree()
	agents, err := tree.Agents()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, agent := range agents {
		removed, err := tree.RemoveCopies(agent, l.manifest.ID, func(id string) bool { return messages[id] })
		n += removed
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// removeTemps removes the temporary files that writers killed between
// creating and renaming them left in the run directory and its mailbox
// directory (".<name>.tmp-*"). Readers skip them anyway; this only tidies.
// The caller holds the run lock, so no writer is using one.
func (l *Log) removeTemps() int {
	n := 0
	for _, dir := range []string{l.dir, l.path("mailbox")} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if name := e.Name(); strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-") && e.Type().IsRegular() {
				if os.Remove(filepath.Join(dir, name)) == nil {
					n++
				}
			}
		}
	}
	return n
}
