package mailbox

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
)

// An Act is an effect of a run's event on the mail tree (state.Effect),
// as a store carries it out after the event is committed.
type Act struct {
	state.Effect
	Fresh bool // Deliver: the message was committed by this projection, so no copy of it exists yet
	Read  bool // Deliver: the copy is delivered read (its recipient saw it before it was projected)
}

// AppendActs appends the effects to acts, marked Fresh when they are a
// commit's own (no copy of their messages exists yet).
func AppendActs(acts []Act, effects []state.Effect, fresh bool) []Act {
	for _, e := range effects {
		acts = append(acts, Act{Effect: e, Fresh: fresh})
	}
	return acts
}

// KnownCopies fills in the copy names of effects that its state did not
// know from side, the effects of the same event on a state that tracks
// the reader's messages: the two line up one for one, since the effects
// of an event differ between states only in the names they know.
func KnownCopies(effects, side []state.Effect) []state.Effect {
	for i := range min(len(effects), len(side)) {
		for k, c := range effects[i].Seen {
			if !c.Known() && k < len(side[i].Seen) && side[i].Seen[k].ID == c.ID {
				effects[i].Seen[k] = side[i].Seen[k]
			}
		}
	}
	return effects
}

// CopyName returns the file name of a run message's copy (Name), or its
// id when the name is not known (SetRead then looks for it by id).
func CopyName(c state.Copy) string {
	if c.Known() {
		return Name(Mail{Timestamp: c.SentAt.Time, From: c.From, ID: c.ID})
	}
	return c.ID
}

// OpenCreating opens agent's mailbox in tree, creating it if it has
// none: a run message is delivered to every recipient.
func OpenCreating(tree Store, agent string) (AgentBox, error) {
	d, err := tree.OpenAgent(agent)
	if errors.Is(err, crew.ErrNotFound) {
		if err := tree.Create(agent); err != nil {
			return nil, err
		}
		d, err = tree.OpenAgent(agent)
	}
	return d, err
}

// runTypes maps run message kinds to mail-async types
// (docs/mail-tree.md).
var runTypes = map[string]string{
	events.KindQuestion: "coordination",
	events.KindResponse: "coordination",
	events.KindSteer:    "coordination",
	events.KindFollowUp: "work_assignment",
	events.KindNudge:    "health_escalation",
	events.KindReport:   "completion_report",
	events.KindMessage:  "coordination",
	events.KindFailure:  "health_escalation",
	events.KindTimeout:  "coordination",
}

// RunCopy returns the mail-tree copy of run message m for agent.
func RunCopy(m *events.Message, agent string, read bool) Mail {
	return Mail{
		ID: m.ID, From: m.From, To: agent, Type: runTypes[m.Kind], Body: m.Body,
		Subject:   fmt.Sprintf("%s from %s (run %s, task %s)", m.Kind, m.From, m.Run, m.Task),
		Timestamp: m.SentAt.Time, Priority: m.Priority, Run: m.Run, Task: m.Task, Kind: m.Kind, Read: read,
	}
}

// Project does what acts ask of the mail tree: it delivers the copies of
// run messages and sets the read flags of those delivered, acknowledged
// or rejected, and of questions answered. open returns an agent's mail
// directory, open; failed is told of an agent whose directory met an
// error, so that it is opened (and checked) again next time.
//
// Each agent's directory gets its acts in order (a read flag after its
// copy); different agents' directories are written side by side. A
// fresh copy whose recipient has seen it by the end of acts is delivered
// read at once, which writes it once instead of twice. Copies are
// projections of a durable log, so they are not fsynced: a copy lost in
// a crash is delivered again, under the same name. It returns the errors
// met, joined.
func Project(acts []Act, open func(agent string) (AgentBox, error), failed func(agent string)) error {
	fresh := map[string]int{} // agent/id of a fresh copy -> its act
	byAgent := map[string][]*Act{}
	var agents []string
	for i := range acts {
		a := &acts[i]
		if a.Deliver != nil && a.Fresh {
			fresh[a.Agent+"/"+a.Deliver.ID] = i
		} else if a.Deliver == nil && len(fresh) > 0 {
			for _, c := range a.Seen {
				if j, ok := fresh[a.Agent+"/"+c.ID]; ok {
					acts[j].Read = true
				}
			}
		}
		if byAgent[a.Agent] == nil {
			agents = append(agents, a.Agent)
		}
		byAgent[a.Agent] = append(byAgent[a.Agent], a)
	}
	errs := make([]error, len(agents))
	do := func(k int) {
		agent := agents[k]
		d, err := open(agent)
		if err != nil {
			errs[k] = err
			return
		}
		var es []error
		for _, a := range byAgent[agent] {
			if a.Deliver != nil {
				mail := RunCopy(a.Deliver, d.Agent(), a.Read)
				if a.Fresh {
					_, err = d.DeliverNew(mail)
				} else {
					_, err = d.Deliver(mail, false)
				}
				es = append(es, err)
				continue
			}
			es = append(es, markSeen(d, a.Seen, func(c state.Copy) bool {
				if len(fresh) == 0 {
					return false // no key made for each of a reader's 100,000 copies
				}
				_, ok := fresh[a.Agent+"/"+c.ID]
				return ok // delivered read
			}))
		}
		if errs[k] = errors.Join(es...); errs[k] != nil {
			failed(agent)
		}
	}
	if len(agents) == 1 {
		do(0)
		return errs[0]
	}
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range min(len(agents), projectWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1)) - 1; k < len(agents); k = int(next.Add(1)) - 1 {
				do(k)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// markSeen sets the read flags of the copies seen in d, but those skip
// says were delivered read. Many (a reader's inbox of thousands) in a
// mail directory (AgentDir) are set by projectWorkers goroutines side by
// side: each flag is a file of its own, and the order they are set in
// does not matter.
func markSeen(d AgentBox, seen []state.Copy, skip func(state.Copy) bool) error {
	mark := func(c state.Copy) error {
		if skip(c) {
			return nil
		}
		if m, ok := d.(copyMarker); ok {
			return m.MarkCopyRead(CopyName(c))
		}
		return d.SetRead(CopyName(c), true, false)
	}
	if _, ok := d.(copyMarker); !ok || len(seen) < 256 {
		var es []error
		for _, c := range seen {
			if err := mark(c); err != nil {
				es = append(es, err)
			}
		}
		return errors.Join(es...)
	}
	errs := make([]error, projectWorkers)
	var wg sync.WaitGroup
	for w := range projectWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var es []error
			for k := w; k < len(seen); k += projectWorkers {
				if err := mark(seen[k]); err != nil {
					es = append(es, err) // only errors: 100,000 nils were 10 MB of garbage
				}
			}
			errs[w] = errors.Join(es...)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// copyMarker is an AgentBox that sets a copy's read flag in place
// (AgentDir.MarkCopyRead).
type copyMarker interface {
	MarkCopyRead(name string) error
}

// projectWorkers is how many agents' mail directories Project writes at
// once: file creation is mostly system time, which several processors
// share out.
const projectWorkers = 4
