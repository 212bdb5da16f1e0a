// crew mail send, check, read and archive: the per-agent mail tree.

package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
	"github.com/crew-dev/crew/internal/human"
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
	body, err := e.optionalBody(0, "")
	if err != nil {
		return err
	}
	m, err := e.app().MailSend(c.Context, app.MailSend{To: c.String("to"), From: c.String("from"), Type: c.String("type"), Subject: c.String("subject"),
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
	entries, err := e.app().MailCheck(c.Context, app.MailCheck{Agent: c.Args().First(), Unread: c.Bool("unread"), Archived: c.Bool("archived")})
	for _, en := range entries {
		if perr := e.emit(en.Mail, mailText(en, false)); perr != nil {
			return perr
		}
	}
	if err == nil && len(entries) == 0 && !e.json {
		fmt.Fprintln(e.stderr, "crew: no messages")
	}
	return e.unreadable(err)
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
	req := app.MailRead{Agent: c.Args().First(), IDs: c.Args().Tail(), All: c.Bool("all")}
	entries, err := e.workerApp().MailRead(c.Context, req)
	if len(req.IDs) == 0 && len(entries) == 0 && err == nil && !e.json {
		what, hint := "unread messages", fmt.Sprintf(" (crew mail read %s --all reads them all)", req.Agent)
		if req.All {
			what, hint = "messages", ""
		}
		fmt.Fprintf(e.stderr, "crew: no %s for %s%s\n", what, req.Agent, hint)
	}
	for _, en := range entries {
		if perr := e.emit(en.Mail, mailText(en, true)); perr != nil {
			return perr
		}
	}
	return e.unreadable(err)
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
	moved, err := e.app().MailArchive(c.Context, app.MailArchive{Agent: c.Args().First(), OlderThan: c.String("older-than"), IncludeUnread: c.Bool("include-unread")})
	for _, m := range moved {
		if perr := e.emit(m, ""); perr != nil {
			return perr
		}
	}
	if err != nil {
		return err
	}
	if !e.json {
		fmt.Fprintf(e.stdout, "archived %s\n", human.Count(len(moved), "message"))
	}
	return nil
}

// mailText is the human form of a mail file: a header line, and with body
// the whole body.
func mailText(en app.MailEntry, body bool) string {
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
