package run

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

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/fsys"
	"github.com/crew-dev/crew/internal/jsonl"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
)

// RepairReport says what Repair found and did.
type RepairReport struct {
	Run         string   `json:"run"`
	Events      int64    `json:"events"`                // events in the log after repair
	Damaged     []string `json:"damaged,omitempty"`     // what was wrong, one entry per place
	Quarantine  string   `json:"quarantine,omitempty"`  // file the damaged bytes were moved to
	LostSeqs    []int64  `json:"lostSeqs,omitempty"`    // seqs that no readable line holds
	TornBytes   int64    `json:"tornBytes,omitempty"`   // bytes of an unterminated last line moved aside
	Rebuilt     bool     `json:"rebuilt"`               // projections rebuilt from the log
	TempRemoved int      `json:"tempRemoved,omitempty"` // temporary files left by killed writers, removed
	RepairedSeq int64    `json:"repairedSeq,omitempty"`
}

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
//
// A run in a RemoteStore has no files to repair: Repair returns an error
// wrapping crew.ErrInvalid (exit 2) and does nothing.
func (r *Run) Repair(ctx context.Context) (rep *RepairReport, err error) {
	if r.remote != nil {
		return nil, fmt.Errorf("run %s lives on %s, not in files: its log is a JetStream stream that takes whole events only, and there are no projection files to rebuild; crew repair is for runs under a .crew directory: %w", r.ID(), r.root, crew.ErrInvalid)
	}
	err = r.exclusive(func() error {
		rep, err = r.repair(ctx)
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
	run bool  // it is a run.created event
}

// repair is Repair, run exclusively. It reads the log twice: the first pass
// decides, from the seqs alone, which lines to keep and how to number them;
// the second writes the repaired log (only when something was wrong) to a
// temporary file, streaming, so memory does not grow with the log.
func (r *Run) repair(ctx context.Context) (*RepairReport, error) {
	defer r.dropCache()
	rep := &RepairReport{Run: r.ID(), TempRemoved: r.removeTemps()}
	f, err := os.Open(r.EventsPath())
	if errors.Is(err, os.ErrNotExist) {
		// A lost log: start a new one from the manifest.
		if f, err = fsys.OpenFile(r.EventsPath(), os.O_RDWR|os.O_CREATE|os.O_EXCL, r.root.Perm.File); err != nil {
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

	// Pass 1: the seq of every line.
	var lines []repairLine
	rd := jsonl.NewReader(f, 0, 1)
	for {
		l, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		var rl repairLine
		if e, err := events.Decode(l.Data); err == nil {
			rl = repairLine{seq: e.Seq}
		}
		lines = append(lines, rl)
	}

	// Decide. keep[i] is the new seq of line i, or 0 to quarantine it;
	// fill[i] is how many lost seqs are filled just before it.
	keep := make([]int64, len(lines))
	fill := make([]int64, len(lines))
	var last, shift, unreadable int64
	for i, l := range lines {
		s := l.seq - shift
		switch {
		case l.seq == 0:
			unreadable++
			continue
		case s <= last:
			continue // a duplicate or out of order: quarantined
		case s > last+1 && nextContinues(lines, i, last, shift):
			continue // this line's seq is the damaged part: the next lines go on from last
		case s > last+1:
			gap := s - last - 1
			if gap > fillLimit {
				keepGap := min(unreadable, fillLimit)
				shift += gap - keepGap
				rep.Damaged = append(rep.Damaged, fmt.Sprintf("line %d: seq jumps from %d to %d; later events renumbered from %d", i+1, last, l.seq, last+keepGap+1))
				gap = keepGap
			}
			fill[i] = gap
			s = last + gap + 1
		}
		keep[i], last, unreadable = s, s, 0
	}
	if len(lines) == 0 && len(rep.Damaged) == 0 {
		rep.Damaged = append(rep.Damaged, "events.jsonl holds no events")
	}
	dirty := len(lines) == 0 || shift > 0 || size > complete || len(rep.Damaged) > 0
	for i := range lines {
		dirty = dirty || keep[i] == 0 || fill[i] > 0
	}
	if !dirty {
		rep.Events = last
		if err := r.rebuild(); err != nil {
			return rep, err
		}
		rep.Rebuilt = true
		return rep, nil
	}

	// Pass 2: write the repaired log and the quarantine file.
	now := events.Now()
	tmp, err := fsys.CreateTemp(r.dir, ".events.jsonl.tmp-repair-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	out := bufio.NewWriterSize(fsysWriter{tmp}, 1<<20)
	var bad []byte
	var seq int64
	emit := func(e *events.Event) error {
		line, err := events.Marshal(e)
		if err != nil {
			return err
		}
		_, err = out.Write(line)
		return err
	}
	rd = jsonl.NewReader(f, 0, 1)
	for i := 0; ; i++ {
		l, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if keep[i] == 0 {
			reason := "unreadable event"
			if lines[i].seq > 0 {
				reason = fmt.Sprintf("seq %d out of order", lines[i].seq)
			}
			rep.Damaged = append(rep.Damaged, fmt.Sprintf("line %d: %s", i+1, reason))
			bad = append(bad, fmt.Sprintf("# line %d, byte %d\n", i+1, l.Offset)...)
			bad = append(bad, l.Data...)
			bad = append(bad, '\n')
			continue
		}
		e, _ := events.Decode(l.Data)
		for n := int64(0); n < fill[i]; n++ {
			seq++
			filler := r.filler(seq, e.At)
			if filler.Type == events.LogRepaired {
				rep.LostSeqs = append(rep.LostSeqs, seq)
			}
			if err := emit(&filler); err != nil {
				return nil, err
			}
		}
		seq++
		if keep[i] == lines[i].seq {
			if _, err := out.Write(append(l.Data, '\n')); err != nil {
				return nil, err
			}
			continue
		}
		e.Seq = keep[i] // renumbered
		if e.Message != nil {
			e.Message.Seq = keep[i]
		}
		if err := emit(&e); err != nil {
			return nil, err
		}
	}
	if seq == 0 { // nothing readable at all: the run begins again from its manifest
		seq++
		created := r.filler(seq, now)
		if err := emit(&created); err != nil {
			return nil, err
		}
	}
	if size > complete {
		rep.TornBytes = size - complete
		tornData := make([]byte, rep.TornBytes)
		if _, err := f.ReadAt(tornData, complete); err != nil {
			return nil, err
		}
		bad = append(bad, fmt.Sprintf("# unterminated last line, byte %d\n", complete)...)
		bad = append(bad, tornData...)
		bad = append(bad, '\n')
		rep.Damaged = append(rep.Damaged, fmt.Sprintf("byte %d: unterminated last line of %d bytes", complete, rep.TornBytes))
	}
	if len(bad) > 0 {
		rep.Quarantine = r.EventsPath() + ".quarantine-" + now.Format("20060102T150405.000Z")
	}
	// The log.repaired event names what was lost, with the first few
	// places; the quarantine file keeps every damaged byte.
	shown := rep.Damaged
	if len(shown) > 20 {
		shown = append(shown[:20:20], fmt.Sprintf("and %d more", len(rep.Damaged)-20))
	}
	lost := rep.LostSeqs
	if len(lost) > 100 {
		lost = lost[:100]
	}
	reason := fmt.Sprintf("%d damaged places; %d seqs lost", len(rep.Damaged), len(rep.LostSeqs))
	d := repairData{Damaged: shown, LostSeqs: lost}
	if rep.Quarantine != "" {
		d.Quarantine = filepath.Base(rep.Quarantine)
		reason += "; damaged bytes moved to " + d.Quarantine
	}
	data, _ := json.Marshal(d)
	seq++
	ev := events.Event{Seq: seq, At: now, Type: events.LogRepaired, Run: r.ID(), Actor: "crew", Reason: reason, Data: data}
	if err := emit(&ev); err != nil {
		return nil, err
	}
	rep.RepairedSeq = seq
	if err := out.Flush(); err != nil {
		return nil, fmt.Errorf("rewrite %s: %w", r.EventsPath(), err)
	}
	if err := fsys.SyncFile(tmp); err != nil {
		return nil, fmt.Errorf("rewrite %s: %w", r.EventsPath(), err)
	}
	if err := os.Chmod(tmp.Name(), r.root.Perm.File); err != nil {
		return nil, err
	}
	if rep.Quarantine != "" {
		if err := writeFileSync(rep.Quarantine, bad, r.root.Perm.File); err != nil {
			return nil, fmt.Errorf("write quarantine file: %w", err)
		}
	}
	if err := fsys.RenameFile(tmp.Name(), r.EventsPath()); err != nil {
		if rep.Quarantine != "" {
			os.Remove(rep.Quarantine) // the damaged bytes are still in the log
		}
		return nil, fmt.Errorf("rewrite %s: %w", r.EventsPath(), err)
	}
	if err := syncDir(r.dir); err != nil {
		return nil, err
	}
	rep.Events = seq
	if err := r.rebuild(); err != nil {
		return rep, err
	}
	rep.Rebuilt = true
	return rep, nil
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
func (r *Run) filler(seq int64, at events.Time) events.Event {
	if seq == 1 {
		data, _ := json.Marshal(r.Manifest)
		return events.Event{Seq: 1, At: r.Manifest.CreatedAt, Type: events.RunCreated, Run: r.ID(), Actor: r.Manifest.Leader, Data: data}
	}
	return events.Event{Seq: seq, At: at, Type: events.LogRepaired, Run: r.ID(), Actor: "crew",
		Reason: fmt.Sprintf("seq %d was lost: no readable line held it", seq)}
}

// rebuild derives every projection afresh from the log. The caller holds
// the run lock.
func (r *Run) rebuild() error {
	st := state.New()
	c, err := events.Read(r.EventsPath(), 0)
	if err != nil {
		return err
	}
	defer c.Close()
	var acts []treeAct
	err = c.Scan(func(de *events.DamageError) { st.Damage = append(st.Damage, de.Error()) }, func(e *events.Event) error {
		effects, _ := st.Apply(e)
		acts = appendActs(acts, effects, false)
		return nil
	})
	if err != nil {
		return err
	}
	st.Offset = c.Offset()
	if err := mkdir(r.path("mailbox"), r.root.Perm); err != nil {
		return err
	}
	for _, file := range mailbox.Files {
		if err := r.rebuildMailbox(file); err != nil { // streamed from the log
			return err
		}
	}
	// Mail-tree copies: delivering again is harmless (same names), and
	// read flags follow the delivery status.
	if err := r.projectTree(acts); err != nil {
		return err
	}
	if err := r.writeOpenSnapshot(st); err != nil {
		return err
	}
	return r.writeSnapshot(st)
}

// removeTemps removes the temporary files that writers killed between
// creating and renaming them left in the run directory and its mailbox
// directory (".<name>.tmp-*"). Readers skip them anyway; this only tidies.
// The caller holds the run lock, so no writer is using one.
func (r *Run) removeTemps() int {
	n := 0
	for _, dir := range []string{r.dir, r.path("mailbox")} {
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
