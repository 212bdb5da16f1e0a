package file

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/state"
	"github.com/crew-dev/crew/store"
)

// Events implements store.Log: a binary search into events.jsonl to the
// line after since (events.Read).
func (l *Log) Events(since int64) (store.Cursor, error) {
	return events.Read(l.EventsPath(), since)
}

// Bodies implements store.Log. It calls fn with the stored message of each open entry of list,
// which is in seq order, carrying the entry's current status. It reads the
// mailbox files from a cursor, side by side with the list (both are in seq
// order), so it holds one message at a time; a message the projection does
// not hold (yet) is read from the log. A mailbox file in which it met
// damage is rebuilt from the log afterwards.
func (l *Log) Bodies(ctx context.Context, list []*state.Open, fn func(*events.Message) error) error {
	type cursor struct {
		c   *mailbox.Cursor
		cur *events.Message
		eof bool
	}
	cursors := map[string]*cursor{}
	damaged := map[string]bool{}
	defer func() {
		for _, c := range cursors {
			c.c.Close()
		}
		for file := range damaged {
			l.healMailbox(file + ".jsonl")
		}
	}()
	for _, o := range list {
		c := cursors[o.File]
		if c == nil {
			mc, err := mailbox.Read(l.MailboxPath(o.File+".jsonl"), o.Seq-1)
			if err != nil {
				return err
			}
			c = &cursor{c: mc}
			cursors[o.File] = c
		}
		for !c.eof && (c.cur == nil || c.cur.Seq < o.Seq) {
			m, err := c.c.Next()
			if err == io.EOF {
				c.eof = true
				break
			}
			if err != nil && !errors.Is(err, crew.ErrDamaged) {
				c.eof = true // an I/O error would repeat: the log covers the rest
				break
			}
			if err != nil {
				damaged[o.File] = true // the log fallback below covers it
				continue
			}
			c.cur = &m
		}
		var m events.Message
		if c.cur != nil && c.cur.Seq == o.Seq && c.cur.ID == o.ID {
			m = *c.cur
		} else {
			e, err := l.eventAt(o.Seq)
			if err != nil {
				return err
			}
			if e.Message == nil || e.Message.ID != o.ID {
				return fmt.Errorf("seq %d does not hold message %s: %w", o.Seq, o.ID, crew.ErrDamaged)
			}
			m = *e.Message
		}
		if err := fn(o.Current(&m)); err != nil {
			return err
		}
	}
	return nil
}

// healMailbox rebuilds from the log a mailbox file in which a reader met
// damage, under the run lock. It is best effort: the reader has already
// fallen back to the log, and a read-only state root is left as it is.
func (l *Log) healMailbox(file string) {
	l.exclusive(func() error { return l.rebuildMailbox(file) })
}

// eventAt reads the event with the given seq from the log.
func (l *Log) eventAt(seq int64) (events.Event, error) {
	c, err := events.Read(l.EventsPath(), seq-1)
	if err != nil {
		return events.Event{}, err
	}
	defer c.Close()
	e, err := c.Next()
	if err != nil && e.Seq != seq {
		if err == io.EOF {
			err = fmt.Errorf("no event with seq %d: %w", seq, crew.ErrNotFound)
		}
		return events.Event{}, err
	}
	return e, nil
}
