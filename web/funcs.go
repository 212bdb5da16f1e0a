package web

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/internal/human"

	"github.com/crew-dev/crew/task"
)

// funcs are the templates' functions.
var funcs = template.FuncMap{
	"ago": func(t time.Time) string { return dur(time.Since(t).Seconds()) },
	"dur": dur,
	// text shows control and bidirectional characters as Go escapes
	// (internal/human, the command line's rule), so that a body cannot
	// reorder what the page shows around it; html/template escapes the
	// rest for its context.
	"text":     human.Escape,
	"add":      func(a, b int) int { return a + b },
	"join":     func(argv []string) string { return strings.Join(argv, " ") },
	"terminal": func(s task.State) bool { return s.Terminal() },
	"pair":     func(a, b any) struct{ A, B any } { return struct{ A, B any }{a, b} },
	// priorities and defaultPriority are the priorities a form offers
	// and the one it selects (events).
	"priorities":      func() []string { return events.Priorities },
	"defaultPriority": func() string { return events.DefaultPriority },
	"send": func(p *page, taskID, action, label, hint string) sendForm {
		return sendForm{Page: p, Task: taskID, Action: action, Label: label, Hint: hint}
	},
}

// sendForm is what the send and move templates get: a form for one
// action on a task.
type sendForm struct {
	Page                      *page
	Task, Action, Label, Hint string
}

// dur formats seconds for people: "850ms", "42s", "3m05s", "2h10m",
// "3d4h".
func dur(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}
