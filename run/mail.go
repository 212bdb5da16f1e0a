package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mailbox"
)

// MailOptions is a message sent with crew mail send, outside any run.
type MailOptions struct {
	To, From, Type, Subject, Body, Priority string
	// CreateRecipient creates the recipient's mailbox if it has none;
	// otherwise sending to an agent with no mailbox is crew.ErrNotFound.
	CreateRecipient bool
}

// SendMail delivers a message into an agent's mail tree (docs/mail-tree.md),
// durably: the file and its directory are fsynced before it returns (on
// a server, the server has stored it).
// Errors: crew.ErrInvalid for a bad agent id, type, priority or body (or
// neither body nor subject);
// crew.ErrNotFound for a recipient without a mailbox.
func (root *Root) SendMail(o MailOptions) (mailbox.Mail, error) {
	if err := crew.ValidateID("agent", o.To); err != nil {
		return mailbox.Mail{}, err
	}
	if err := crew.ValidateID("agent", o.From); err != nil {
		return mailbox.Mail{}, err
	}
	if o.Type == "" {
		o.Type = "coordination"
	}
	valid := false
	for _, t := range mailbox.Types {
		valid = valid || t == o.Type
	}
	if !valid {
		return mailbox.Mail{}, fmt.Errorf("invalid mail type %q: use one of %s: %w", o.Type, strings.Join(mailbox.Types, ", "), crew.ErrInvalid)
	}
	if o.Priority == "" {
		o.Priority = events.DefaultPriority
	}
	if err := CheckPriority(o.Priority); err != nil {
		return mailbox.Mail{}, err
	}
	for _, s := range []string{o.Body, o.Subject} {
		if !utf8.ValidString(s) {
			return mailbox.Mail{}, fmt.Errorf("mail is not valid UTF-8; crew refuses to alter it: %w", crew.ErrInvalid)
		}
	}
	if strings.TrimSpace(o.Body) == "" && strings.TrimSpace(o.Subject) == "" {
		return mailbox.Mail{}, &EmptyBodyError{Kind: "mail"}
	}
	if len(o.Body) > root.maxBody() {
		return mailbox.Mail{}, BodyOverLimit("mail", int64(len(o.Body)), false, root.maxBody())
	}
	tree := root.Mail()
	if d, err := tree.OpenAgent(o.To); err == nil {
		d.Close()
	} else if !errors.Is(err, crew.ErrNotFound) {
		return mailbox.Mail{}, err // a mailbox that is a link, or not a directory: named, not created over
	} else if !o.CreateRecipient {
		return mailbox.Mail{}, fmt.Errorf("no mailbox for agent %s; send with --create-recipient to create it: %w", o.To, crew.ErrNotFound)
	} else if err := tree.Create(o.To); err != nil {
		return mailbox.Mail{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return mailbox.Mail{}, err
	}
	if o.Subject == "" {
		o.Subject = firstLine(o.Body, 72)
	}
	m := mailbox.Mail{ID: id.String(), From: o.From, To: o.To, Type: o.Type, Subject: o.Subject, Body: o.Body,
		Timestamp: events.Now().Time, Priority: o.Priority}
	if _, err := tree.Deliver(o.To, m, true); err != nil {
		return mailbox.Mail{}, err
	}
	return m, nil
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}

// MailIDs returns the ids of agent's messages not yet read (with all,
// every message not archived), oldest first: what a mail client opens,
// for ReadMail. Files that cannot be read are returned in bad; an unknown
// agent is crew.ErrNotFound.
func (root *Root) MailIDs(agent string, all bool) (ids []string, bad []error, err error) {
	if err := crew.ValidateID("agent", agent); err != nil {
		return nil, nil, err
	}
	entries, bad, err := root.Mail().List(agent, false)
	if err != nil {
		return nil, nil, err
	}
	for _, en := range entries {
		if all || !en.Mail.Read {
			ids = append(ids, en.Mail.ID)
		}
	}
	return ids, bad, nil
}

// ReadMail returns the agent's messages with the given ids and marks them
// read. For copies of run messages the read flag is not the source of
// truth: ReadMail records message.delivered in the run (which then sets the
// flag), so the run and the mail tree never disagree. An unknown id is
// crew.ErrNotFound.
func (root *Root) ReadMail(ctx context.Context, agent string, ids []string) ([]mailbox.Entry, error) {
	tree := root.Mail()
	var out []mailbox.Entry
	for _, id := range ids {
		e, err := tree.Find(agent, id)
		if err != nil {
			return out, err
		}
		if e.Mail.Run != "" {
			if err := root.deliverRunCopy(ctx, agent, e.Mail); err != nil {
				return out, err
			}
		} else if err := tree.SetRead(agent, id, true, true); err != nil {
			return out, err
		}
		e.Mail.Read = true
		out = append(out, e)
	}
	return out, nil
}

// deliverRunCopy marks a run message delivered to the participant whose
// copy agent holds.
func (root *Root) deliverRunCopy(ctx context.Context, agent string, m mailbox.Mail) error {
	r, err := root.Open(m.Run)
	if err != nil {
		return err
	}
	st, err := r.TaskState()
	if err != nil {
		return err
	}
	var who []string
	if k, _ := events.KindOf(m.Kind); agent == r.Manifest.Leader && k.Direction == events.Outbox {
		who = append(who, Leader)
	}
	for _, t := range st.TaskList() {
		if t.Agent == agent && (m.Task == t.ID || m.Task == events.Broadcast) {
			who = append(who, t.ID)
		}
	}
	for _, p := range who {
		if _, err := r.MarkDeliveredVia(ctx, p, []string{m.ID}, events.ViaMail); err != nil {
			return err
		}
	}
	return nil
}
