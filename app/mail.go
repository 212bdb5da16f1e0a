package app

import (
	"context"
	"fmt"
	"time"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/run"
)

// Mail is a message of the per-agent mail tree, the record mail send,
// check and read print (the mail file's format, docs/mail-tree.md).
type Mail = mailbox.Mail

// MailEntry is a message as the mail tree holds it: Mail, whether it is
// archived, its file's name and path.
type MailEntry = mailbox.Entry

// MailSend is the request of MailSend: a message outside runs.
type MailSend struct {
	To              string `json:"to" jsonschema:"the recipient agent"`
	From            string `json:"from,omitempty" jsonschema:"the sending agent (default: the server's --as or CREW_AGENT, else leader)"`
	Type            string `json:"type,omitempty" jsonschema:"work_assignment, completion_report, merge_notification, health_escalation or coordination (default)"`
	Subject         string `json:"subject,omitempty" jsonschema:"a one-line subject (default: the body's first line)"`
	Body            string `json:"body" jsonschema:"the message text"`
	Priority        string `json:"priority,omitempty" jsonschema:"low, normal (default), high or urgent"`
	CreateRecipient bool   `json:"create_recipient,omitempty" jsonschema:"create the recipient's mailbox if it has none"`
}

// MailCheck is the request of MailCheck.
type MailCheck struct {
	Agent    string `json:"agent,omitempty" jsonschema:"the agent whose mail to list (default: the server's --as, else every agent)"`
	Unread   bool   `json:"unread,omitempty" jsonschema:"only unread mail"`
	Archived bool   `json:"archived,omitempty" jsonschema:"include archived mail"`
}

// MailRead is the request of MailRead.
type MailRead struct {
	Agent string   `json:"agent" jsonschema:"the agent whose mail it is"`
	IDs   []string `json:"ids" jsonschema:"the ids of the mail to read (and mark read); none: every unread one"`
	All   bool     `json:"all,omitempty" jsonschema:"with no ids: every message not archived, read ones too"`
}

// MailArchive is the request of MailArchive.
type MailArchive struct {
	Agent         string `json:"agent,omitempty" jsonschema:"the agent whose mail to archive (default: every agent)"`
	OlderThan     string `json:"older_than,omitempty" jsonschema:"archive messages older than this duration (default 24h)"`
	IncludeUnread bool   `json:"include_unread,omitempty" jsonschema:"archive unread messages too"`
}

// Archived is a record of MailArchive: {"agent":A,"archived":file name}.
type Archived struct {
	Agent    string `json:"agent"`
	Archived string `json:"archived"`
}

// MailSend delivers a message into req.To's mailbox, durably, from
// req.From (else the identity's agent, else "leader"), and returns it.
// Errors (run.Root.SendMail): crew.ErrInvalid for no recipient, a bad
// agent, type, priority or body; crew.ErrNotFound for a recipient
// without a mailbox unless req.CreateRecipient.
func (a *App) MailSend(_ context.Context, req MailSend) (*Mail, error) {
	if req.To == "" {
		return nil, fmt.Errorf("mail send needs --to AGENT: %w", crew.ErrInvalid)
	}
	root, err := a.root()
	if err != nil {
		return nil, err
	}
	from := req.From
	if from == "" {
		if from, err = a.actor("", "leader"); err != nil {
			return nil, err
		}
	}
	m, err := root.SendMail(run.MailOptions{To: req.To, From: from, Type: req.Type, Subject: req.Subject,
		Body: req.Body, Priority: req.Priority, CreateRecipient: req.CreateRecipient})
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// MailCheck lists the mail of req.Agent (else the identity's agent,
// else every agent with a mailbox), in time order per agent, without
// marking it read. A named agent without a mailbox is crew.ErrNotFound.
// Mail files that cannot be read make the error an *Unreadable after
// the list.
func (a *App) MailCheck(_ context.Context, req MailCheck) ([]MailEntry, error) {
	tree, agents, err := a.agents(req.Agent)
	if err != nil {
		return nil, err
	}
	var bad []error
	out := []MailEntry{}
	for _, ag := range agents {
		entries, errs, err := tree.List(ag, req.Archived)
		if err != nil {
			return out, err
		}
		bad = append(bad, errs...)
		for _, en := range entries {
			if !req.Unread || !en.Mail.Read {
				out = append(out, en)
			}
		}
	}
	return out, unreadable(bad, "mail file", "; the rest are listed")
}

// MailRead returns the agent's messages req.IDs (none: every unread one;
// with req.All every one not archived) and marks them read. An unknown
// id is crew.ErrNotFound, after the messages before it. Ids and All
// together are crew.ErrInvalid. Mail files that cannot be read make the
// error an *Unreadable after the messages. Read by a worker (the identity
// has a task), it is a sign of the worker's life (SignOfLife).
func (a *App) MailRead(ctx context.Context, req MailRead) ([]MailEntry, error) {
	if req.Agent == "" {
		return nil, fmt.Errorf("mail read takes an agent, then message ids (none: every unread message): %w", crew.ErrInvalid)
	}
	if req.All && len(req.IDs) > 0 {
		return nil, fmt.Errorf("mail read takes message ids or --all, not both: %w", crew.ErrInvalid)
	}
	root, err := a.root()
	if err != nil {
		return nil, err
	}
	ids := req.IDs
	var bad []error
	if len(ids) == 0 {
		if ids, bad, err = root.MailIDs(req.Agent, req.All); err != nil {
			return nil, err
		}
	}
	entries, err := root.ReadMail(ctx, req.Agent, ids)
	a.alive()
	if entries == nil {
		entries = []MailEntry{}
	}
	if err != nil {
		return entries, err
	}
	return entries, unreadable(bad, "mail file", "; the rest are read")
}

// MailArchive moves the read messages of req.Agent (else the identity's
// agent, else every agent) older than req.OlderThan (default 24h) into
// their archive, unread ones too with req.IncludeUnread, and returns
// what it moved.
func (a *App) MailArchive(_ context.Context, req MailArchive) ([]Archived, error) {
	olderThan := "24h"
	if req.OlderThan != "" {
		olderThan = req.OlderThan
	}
	d, err := ParseDuration(olderThan)
	if err != nil {
		return nil, err
	}
	tree, agents, err := a.agents(req.Agent)
	if err != nil {
		return nil, err
	}
	out := []Archived{}
	for _, ag := range agents {
		moved, err := tree.Archive(ag, d, req.IncludeUnread, time.Now())
		if err != nil {
			return out, err
		}
		for _, name := range moved {
			out = append(out, Archived{Agent: ag, Archived: name})
		}
	}
	return out, nil
}

// agents returns the mail tree and agent (whose mailbox must exist),
// else the identity's agent, else every agent with a mailbox.
func (a *App) agents(agent string) (mailbox.Store, []string, error) {
	root, err := a.root()
	if err != nil {
		return nil, nil, err
	}
	tree := root.Mail()
	if agent != "" {
		if err := crew.ValidateID("agent", agent); err != nil {
			return nil, nil, err
		}
		d, err := tree.OpenAgent(agent) // missing (exit 4), or refused: a link, not a directory
		if err != nil {
			return nil, nil, err
		}
		d.Close()
		return tree, []string{agent}, nil
	}
	if as := a.Identity.As; as != "" {
		return tree, []string{as}, crew.ValidateID("agent", as)
	}
	agents, err := tree.Agents()
	return tree, agents, err
}

// marshal encodes v as one compact JSON value, HTML characters
// unescaped (events.Marshal, without its line break).
func marshal(v any) ([]byte, error) {
	b, err := events.Marshal(v)
	if err != nil {
		return nil, err
	}
	return b[:len(b)-1], nil
}
