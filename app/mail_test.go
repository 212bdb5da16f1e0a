package app_test

import (
	"context"
	"errors"
	"testing"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/app"
)

// Mail is sent from the identity's agent, listed without being marked
// read, and read (with no ids: every unread one) once.
func TestMail(t *testing.T) {
	ctx := context.Background()
	a := as(newApp(t, app.Identity{}), app.Identity{As: "builder"})
	m, err := a.MailSend(ctx, app.MailSend{To: "reviewer", Body: "PR #12 is ready", CreateRecipient: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.From != "builder" || m.Subject != "PR #12 is ready" {
		t.Fatalf("sent %+v", m)
	}
	if _, err := a.MailSend(ctx, app.MailSend{To: "nobody", Body: "hi"}); !errors.Is(err, crew.ErrNotFound) {
		t.Fatalf("send to an agent without a mailbox: %v, want not found", err)
	}
	for range 2 {
		got, err := a.MailCheck(ctx, app.MailCheck{Agent: "reviewer", Unread: true})
		if err != nil || len(got) != 1 || got[0].Mail.ID != m.ID {
			t.Fatalf("check: %+v, %v; want the mail, unread", got, err)
		}
	}
	for _, want := range []int{1, 0} {
		got, err := a.MailRead(ctx, app.MailRead{Agent: "reviewer"})
		if err != nil || len(got) != want {
			t.Fatalf("read: %+v, %v; want %d", got, err, want)
		}
	}
	if _, err := a.MailRead(ctx, app.MailRead{Agent: "reviewer", IDs: []string{m.ID}, All: true}); !errors.Is(err, crew.ErrInvalid) {
		t.Fatalf("read ids and all: %v, want invalid", err)
	}
}
