package run

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/jsonl"
	"github.com/crew-dev/crew/mailbox"
)

// RepairReport says what Repair found and did.
type RepairReport struct {
	Run         string   `json:"run"`
	Events      int64    `json:"events"`               // events in the log after repair
	Damaged     []string `json:"damaged,omitempty"`    // what was wrong, one entry per place
	Quarantine  string   `json:"quarantine,omitempty"` // file the damaged bytes were moved to
	LostSeqs    []int64  `json:"lostSeqs,omitempty"`   // seqs that no readable line holds
	TornBytes   int64    `json:"tornBytes,omitempty"`  // bytes of an unterminated last line moved aside
	Rebuilt     bool     `json:"rebuilt"`              // projections rebuilt from the log
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
func (r *Run) Repair(ctx context.Context) (rep *RepairReport, err error) {
	err = r.exclusive(func() error {
		rep, err = r.repair(ctx)
		return err
	})
	return rep, err
}

// repair is Repair, run exclusively.
func (r *Run) repair(ctx context.Context) (*RepairReport, error) {
	defer r.dropCache()
	rep := &RepairReport{Run: r.ID()}
	f, err := os.Open(r.EventsPath())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	complete, size, err := jsonl.CompleteSize(f)
	if err != nil {
		return nil, err
	}
	var (
		good, bad []byte
		seq       int64
		at        events.Time
	)
	rd := jsonl.NewReader(f, 0, 1)
	for {
		l, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		e, derr := events.Decode(l.Data)
		switch {
		case derr != nil:
			rep.Damaged = append(rep.Damaged, fmt.Sprintf("line %d: unreadable event: %v", l.Num, derr))
		case e.Seq <= seq:
			derr = fmt.Errorf("seq %d out of order", e.Seq)
			rep.Damaged = append(rep.Damaged, fmt.Sprintf("line %d: seq %d out of order after seq %d", l.Num, e.Seq, seq))
		}
		if derr != nil {
			bad = append(bad, fmt.Sprintf("# line %d, byte %d\n", l.Num, l.Offset)...)
			bad = append(bad, l.Data...)
			bad = append(bad, '\n')
			continue
		}
		for seq+1 < e.Seq { // fill a gap
			seq++
			rep.LostSeqs = append(rep.LostSeqs, seq)
			filler := events.Event{Seq: seq, At: e.At, Type: events.LogRepaired, Run: r.ID(), Actor: "crew",
				Reason: fmt.Sprintf("seq %d was lost: no readable line held it", seq)}
			line, _ := events.Marshal(&filler)
			good = append(good, line...)
		}
		good = append(good, l.Data...)
		good = append(good, '\n')
		seq, at = e.Seq, e.At
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
	if len(rep.Damaged) > 0 || len(rep.LostSeqs) > 0 {
		now := events.Now()
		if len(bad) > 0 {
			rep.Quarantine = r.EventsPath() + ".quarantine-" + now.Format("20060102T150405.000Z")
			if err := writeFileSync(rep.Quarantine, bad, r.root.Perm.File); err != nil {
				return nil, fmt.Errorf("write quarantine file: %w", err)
			}
		}
		if now.Before(at.Time) {
			now = at
		}
		data, _ := json.Marshal(repairData{Quarantine: filepath.Base(rep.Quarantine), Damaged: rep.Damaged, LostSeqs: rep.LostSeqs})
		seq++
		ev := events.Event{Seq: seq, At: now, Type: events.LogRepaired, Run: r.ID(), Actor: "crew",
			Reason: fmt.Sprintf("%d damaged places moved to %s; %d seqs lost", len(rep.Damaged), filepath.Base(rep.Quarantine), len(rep.LostSeqs)), Data: data}
		line, _ := events.Marshal(&ev)
		good = append(good, line...)
		rep.RepairedSeq = seq
		if err := writeAtomic(r.EventsPath(), good, r.root.Perm.File, true); err != nil {
			if rep.Quarantine != "" {
				os.Remove(rep.Quarantine) // the damaged bytes are still in the log
			}
			return nil, fmt.Errorf("rewrite %s: %w", r.EventsPath(), err)
		}
	}
	rep.Events = seq
	if err := r.rebuild(); err != nil {
		return rep, err
	}
	rep.Rebuilt = true
	return rep, nil
}

// rebuild derives every projection afresh from the log. The caller holds
// the run lock.
func (r *Run) rebuild() error {
	st := newState()
	c, err := events.Read(r.EventsPath(), 0)
	if err != nil {
		return err
	}
	defer c.Close()
	lines := map[string][]byte{}
	var acts []treeAct
	for {
		e, err := c.Next()
		if err == io.EOF {
			break
		}
		if err != nil && e.Seq == 0 {
			st.Damage = append(st.Damage, err.Error())
			continue
		}
		st.acts = &acts
		st.apply(&e)
		if m := e.Message; m != nil {
			line, err := events.Marshal(m)
			if err != nil {
				return err
			}
			lines[mailbox.FileFor(m)] = append(lines[mailbox.FileFor(m)], line...)
		}
	}
	st.Offset = c.Offset()
	if err := mkdir(r.path("mailbox"), r.root.Perm); err != nil {
		return err
	}
	for _, file := range mailbox.Files {
		if err := writeAtomic(r.MailboxPath(file), lines[file], r.root.Perm.File, false); err != nil {
			return err
		}
	}
	// Mail-tree copies: delivering again is harmless (same names), and
	// read flags follow the delivery status.
	st.acts = nil
	r.projectTree(acts)
	if err := r.writeOpenSnapshot(st); err != nil {
		return err
	}
	return r.writeSnapshot(st)
}
