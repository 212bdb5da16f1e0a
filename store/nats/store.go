package nats

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
)

var (
	_ store.Store = (*Store)(nil)
	_ store.Log   = (*Log)(nil)
)

// Create implements store.Store: a mailbox for the leader (which stays
// if the run cannot be made: an empty mailbox, as its first message
// would make), then the run's stream with first as its seq 1
// (CreateRun).
func (s *Store) Create(ctx context.Context, first *events.Event) (store.Log, error) {
	m, err := store.FirstEvent(first)
	if err != nil {
		return nil, err
	}
	if err := s.Mail().Create(m.Leader); err != nil {
		return nil, err
	}
	if err := s.CreateRun(ctx, first); err != nil {
		return nil, err
	}
	return s.Open(ctx, first.Run)
}

// Open implements store.Store: the run's manifest is the Data of its
// first event (run.created). With Options.KeepLogs, the run's Log is
// opened once and kept.
func (s *Store) Open(ctx context.Context, id string) (store.Log, error) {
	if err := crew.ValidateID("run", id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	l := s.logs[id]
	s.mu.Unlock()
	if l != nil {
		return l, nil
	}
	l, err := s.open(ctx, id)
	if err != nil {
		return nil, err // not a nil *Log in the interface
	}
	if !s.opts.KeepLogs {
		return l, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if kept := s.logs[id]; kept != nil {
		return kept, nil // opened by another goroutine meanwhile
	}
	s.logs[id] = l
	return l, nil
}

// open reads run id's first event and returns a new Log of it.
func (s *Store) open(ctx context.Context, id string) (*Log, error) {
	var first *events.Event
	err := s.Read(ctx, id, 0, func(e *events.Event) error {
		first = e
		return events.ErrStopScan
	})
	if err != nil && err != events.ErrStopScan {
		return nil, err
	}
	var m state.Manifest
	if first == nil || first.Type != events.RunCreated || json.Unmarshal(first.Data, &m) != nil || m.ID != id {
		return nil, fmt.Errorf("run %s on %s does not start with its run.created event: %w", id, s, crew.ErrDamaged)
	}
	l := &Log{s: s, run: id, manifest: m}
	l.project = l.projectTree
	return l, nil
}

// CreateMailbox implements store.Store. The mailbox stays if the
// operation then fails: it is an empty mailbox, which the agent's first
// run message would create anyway.
func (s *Store) CreateMailbox(agent string) (undo func(), err error) {
	return func() {}, s.Mail().Create(agent)
}

// Dir implements store.Store: a store on a server has no directory.
func (s *Store) Dir() string { return "" }
