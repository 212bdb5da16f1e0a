package run

import (
	"context"
	"errors"
	"sync"

	"github.com/google/uuid"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
)

// remoteLog is a run's log in a Backend other than the state root's files
// (NATS JetStream), with the state this process has reduced from it. The
// state is a replay of the log (no snapshot is stored in the backend
// yet); each call reads only what was appended since the last.
//
// It is the second commit path beside commit in store.go, and the only
// other one: the operations (ops.go, read.go) hand both the same
// validation function, and both fold events with State.apply.
type remoteLog struct {
	b   Backend
	run string

	mu sync.Mutex
	st *State // as of st.Seq; nil until first read
}

// state returns the run's state at the log's current end: the cached
// state brought up to date. The caller must not keep it past the next
// call (it is the cache).
func (l *remoteLog) state(ctx context.Context) (*State, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.catchUp(ctx)
}

func (l *remoteLog) catchUp(ctx context.Context) (*State, error) {
	if l.st == nil {
		l.st = newState()
	}
	st := l.st
	err := l.b.Read(ctx, l.run, st.Seq, func(e *events.Event) error {
		if err := st.apply(e); err != nil {
			st.Damage = append(st.Damage, err.Error())
			st.Seq = e.Seq
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, crew.ErrDamaged) {
			st.Damage = append(st.Damage, err.Error())
			return st, nil
		}
		l.st = nil // start again from the log next time
		return nil, err
	}
	return st, nil
}

// commit validates fn against the state at the log's end and appends its
// event as the next seq, on the condition that the log still ends there
// (Backend.Append). When another writer appended first, it reads what
// was appended and validates again: fn runs once per attempt, so it
// must not have effects of its own. One operation id (Nats-Msg-Id)
// serves every attempt, so an append whose acknowledgement was lost is
// stored once.
func (l *remoteLog) commit(ctx context.Context, fn func(*State) (*events.Event, error)) (*events.Event, error) {
	opID, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		st, err := l.catchUp(ctx)
		if err != nil {
			return nil, err
		}
		if err := st.Err(); err != nil {
			return nil, err // writers refuse a damaged log, as in the file store
		}
		ev, err := fn(st)
		if err != nil || ev == nil {
			return nil, err
		}
		ev.Seq = st.Seq + 1
		ev.Run = l.run
		if ev.At.IsZero() {
			ev.At = events.Now()
		}
		if m := ev.Message; m != nil {
			m.Seq, m.Run, m.SentAt, m.Status = ev.Seq, l.run, ev.At, events.StatusPending
		}
		err = l.b.Append(ctx, ev, opID.String())
		if errors.Is(err, crew.ErrConflict) {
			continue // another writer took this seq: validate again against what it wrote
		}
		if err != nil {
			return nil, err
		}
		if err := st.apply(ev); err != nil {
			l.st = nil
		}
		return ev, nil
	}
}
