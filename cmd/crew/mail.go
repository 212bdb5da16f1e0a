// crew mail send, check, read and archive: the per-agent mail tree.

package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/internal/human"
	"github.com/crew-dev/crew/mailbox"
	"github.com/crew-dev/crew/run"
)

func mailCommand() *cli.Command {
	return &cli.Command{
		Name:      "mail",
		Usage:     "the per-agent mail tree: one JSON file per message (mail-async compatible)",
		UsageText: "crew mail send --to reviewer --from builder \"PR #12 is ready\"\ncrew mail check reviewer --unread\ncrew mail archive --older-than 24h",
		Subcommands: []*cli.Command{
			mailSendCommand(), mailCheckCommand(), mailReadCommand(), mailArchiveCommand(),
		},
	}
}

func mailSendCommand() *cli.Command {
	return &cli.Command{
		Name:      "send",
		Usage:     "deliver a message to an agent's mailbox",
		UsageText: "crew mail send --to reviewer --from builder --type merge_notification --subject \"PR #12\" \"ready to merge\"",
		ArgsUsage: "[BODY|-]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "to", Usage: "recipient agent `NAME` (required)"},
			&cli.StringFlag{Name: "from", Usage: "sender agent `NAME` (default: --as / CREW_AGENT, else leader)"},
			&cli.StringFlag{Name: "type", Usage: "`TYPE`: work_assignment, completion_report, merge_notification, health_escalation or coordination", Value: "coordination"},
			&cli.StringFlag{Name: "subject", Usage: "one-line `SUBJECT` (default: the body's first line)"},
			priorityFlag, asFlag,
			&cli.BoolFlag{Name: "create-recipient", Usage: "create the recipient's mailbox if it has none"},
		},
		Action: mailSend,
	}
}

func mailSend(c *cli.Context) error {
	e := newEnv(c)
	if c.String("to") == "" {
		// Checked here, not by cli's Required, so that it is
		// a usage error (exit 2) like every other.
		return fmt.Errorf("mail send needs --to AGENT: %w", crew.ErrInvalid)
	}
	root, err := e.root()
	if err != nil {
		return err
	}
	body, err := e.optionalBody(0, "")
	if err != nil {
		return err
	}
	from := c.String("from")
	if from == "" {
		if from, err = e.actor("leader"); err != nil {
			return err
		}
	}
	m, err := root.SendMail(run.MailOptions{To: c.String("to"), From: from, Type: c.String("type"), Subject: c.String("subject"),
		Body: body, Priority: c.String("priority"), CreateRecipient: c.Bool("create-recipient")})
	if err != nil {
		return err
	}
	return e.emit(m, m.ID)
}

func mailCheckCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "list an agent's messages (all agents when none is named)",
		UsageText: "crew mail check reviewer\ncrew mail check --unread --json",
		ArgsUsage: "[AGENT]",
		Flags: []cli.Flag{asFlag,
			&cli.BoolFlag{Name: "unread", Usage: "only unread messages"},
			&cli.BoolFlag{Name: "archived", Usage: "include archived messages"},
		},
		Action: mailCheck,
	}
}

func mailCheck(c *cli.Context) error {
	e := newEnv(c)
	tree, agents, err := e.agents()
	if err != nil {
		return err
	}
	var bad []error
	n := 0
	for _, a := range agents {
		entries, errs, err := tree.List(a, c.Bool("archived"))
		if err != nil {
			return err
		}
		bad = append(bad, errs...)
		for _, en := range entries {
			if c.Bool("unread") && en.Mail.Read {
				continue
			}
			n++
			if err := e.emit(en.Mail, mailText(en, false)); err != nil {
				return err
			}
		}
	}
	if n == 0 && !e.json && len(bad) == 0 {
		fmt.Fprintln(e.stderr, "crew: no messages")
	}
	return e.unreadable(bad, "listed")
}

// unreadable reports the mail files of bad that could not be read, one
// warning each, and returns crew.ErrDamaged (exit 7; crew.ErrTampered,
// exit 8, if one of them is a symbolic link or no regular file) saying
// that the rest were done (listed, read); nil when bad is empty.
func (e *env) unreadable(bad []error, done string) error {
	for _, b := range bad {
		e.warn(b)
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%s could not be read; the rest are %s: %w", human.Count(len(bad), "mail file"), done, worstClass(bad))
}

func mailReadCommand() *cli.Command {
	return &cli.Command{
		Name:      "read",
		Usage:     "print messages and mark them read: those named, else every unread one (--all: read ones too)",
		UsageText: "crew mail read reviewer\ncrew mail read reviewer 0193a1c2-7b1e-7c3d-9e2f-0a1b2c3d4e5f\ncrew mail read reviewer --all --json",
		ArgsUsage: "AGENT [ID...]",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "all", Usage: "read every message not archived, read ones too"},
		},
		Action: mailRead,
	}
}

func mailRead(c *cli.Context) error {
	e := newEnv(c)
	agent, ids := c.Args().First(), c.Args().Tail()
	if agent == "" {
		return fmt.Errorf("mail read takes an agent, then message ids (none: every unread message): %w", crew.ErrInvalid)
	}
	if c.Bool("all") && len(ids) > 0 {
		return fmt.Errorf("mail read takes message ids or --all, not both: %w", crew.ErrInvalid)
	}
	root, err := e.root()
	if err != nil {
		return err
	}
	var bad []error
	if len(ids) == 0 {
		if ids, bad, err = root.MailIDs(agent, c.Bool("all")); err != nil {
			return err
		}
		if len(ids) == 0 && len(bad) == 0 && !e.json {
			what, hint := "unread messages", fmt.Sprintf(" (crew mail read %s --all reads them all)", agent)
			if c.Bool("all") {
				what, hint = "messages", ""
			}
			fmt.Fprintf(e.stderr, "crew: no %s for %s%s\n", what, agent, hint)
		}
	}
	entries, err := root.ReadMail(c.Context, agent, ids)
	workerAlive(e)
	for _, en := range entries {
		if perr := e.emit(en.Mail, mailText(en, true)); perr != nil {
			return perr
		}
	}
	if err != nil {
		return err
	}
	return e.unreadable(bad, "read")
}

func mailArchiveCommand() *cli.Command {
	return &cli.Command{
		Name:      "archive",
		Usage:     "move old read messages into archive/ (never an unread one unless --include-unread)",
		UsageText: "crew mail archive --older-than 24h\ncrew mail archive reviewer --older-than 7d --include-unread",
		ArgsUsage: "[AGENT]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "older-than", Usage: "archive messages older than `DURATION`", Value: "24h"},
			&cli.BoolFlag{Name: "include-unread", Usage: "archive unread messages too"},
		},
		Action: mailArchive,
	}
}

func mailArchive(c *cli.Context) error {
	e := newEnv(c)
	d, err := duration(c.String("older-than"))
	if err != nil {
		return err
	}
	tree, agents, err := e.agents()
	if err != nil {
		return err
	}
	total := 0
	for _, a := range agents {
		moved, err := tree.Archive(a, d, c.Bool("include-unread"), time.Now())
		if err != nil {
			return err
		}
		for _, name := range moved {
			if err := e.emit(map[string]string{"agent": a, "archived": name}, ""); err != nil {
				return err
			}
		}
		total += len(moved)
	}
	if !e.json {
		fmt.Fprintf(e.stdout, "archived %s\n", human.Count(total, "message"))
	}
	return nil
}

// agents returns the mail tree and the agent named by the first argument
// (or --as), or all agents with a mailbox.
func (e *env) agents() (mailbox.Store, []string, error) {
	root, err := e.root()
	if err != nil {
		return nil, nil, err
	}
	tree := root.Mail()
	if a := e.c.Args().First(); a != "" {
		if err := crew.ValidateID("agent", a); err != nil {
			return nil, nil, err
		}
		d, err := tree.OpenAgent(a) // missing (exit 4), or refused: a link, not a directory
		if err != nil {
			return nil, nil, err
		}
		d.Close()
		return tree, []string{a}, nil
	}
	if a := e.c.String("as"); a != "" {
		return tree, []string{a}, crew.ValidateID("agent", a)
	}
	agents, err := tree.Agents()
	return tree, agents, err
}

// mailText is the human form of a mail file: a header line, and with body
// the whole body.
func mailText(en mailbox.Entry, body bool) string {
	flag := "new "
	if en.Mail.Read {
		flag = "read"
	}
	if en.Archived {
		flag = "arch"
	}
	s := fmt.Sprintf("%s  %s  %s -> %s  %-18s %s  %s", flag, en.Mail.Timestamp.UTC().Format(time.DateTime), human.Escape(en.Mail.From), human.Escape(en.Mail.To),
		en.Mail.Type, human.Line(en.Mail.Subject), en.Mail.ID)
	if body {
		s += "\n    " + indent(en.Mail.Body, "    ")
	}
	return s
}
