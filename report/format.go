package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/crew-dev/crew"
	"github.com/crew-dev/crew/events"
	"github.com/crew-dev/crew/run"
)

// Report formats.
const (
	FormatMarkdown = "markdown"
	FormatJUnit    = "junit"
	FormatMermaid  = "mermaid"
	FormatJSON     = "json"
)

// Formats lists the formats Write knows.
var Formats = []string{FormatMarkdown, FormatJUnit, FormatMermaid, FormatJSON}

// CheckFormat returns nil for a known format and an error wrapping
// crew.ErrInvalid that lists the formats otherwise.
func CheckFormat(format string) error {
	for _, f := range Formats {
		if f == format {
			return nil
		}
	}
	return fmt.Errorf("unknown report format %q: use %s: %w", format, strings.Join(Formats, ", "), crew.ErrInvalid)
}

// Write renders rep in format (one of Formats) to w.
func Write(w io.Writer, rep *Report, format string) error {
	switch format {
	case FormatMarkdown:
		return rep.Markdown(w)
	case FormatJUnit:
		return rep.JUnit(w)
	case FormatMermaid:
		return rep.Mermaid(w)
	case FormatJSON:
		return rep.JSON(w)
	}
	return CheckFormat(format)
}

// JSON writes the whole report as one JSON object on one line, the
// messages last. It streams: the messages are encoded one at a time, so
// the output is never held whole in memory.
func (rep *Report) JSON(w io.Writer) error {
	head := *rep
	head.Messages = nil // omitted: written below, one by one
	line, err := events.Marshal(&head)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	bw.Write(line[:len(line)-len("}\n")])
	bw.WriteString(`,"messages":[`)
	for i, m := range rep.Messages {
		if i > 0 {
			bw.WriteByte(',')
		}
		line, err := events.Marshal(m)
		if err != nil {
			return err
		}
		bw.Write(line[:len(line)-1])
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

// Render loads a report of r and writes it in format to w. Formats that
// shorten bodies (markdown, mermaid) load only what they show. It returns
// rep.Err() after writing: a damaged log is reported in full, then exits 7.
func Render(w io.Writer, r *run.Run, format string) error {
	if err := CheckFormat(format); err != nil {
		return err
	}
	var o Options
	if format == FormatMarkdown || format == FormatMermaid {
		o.BodyRunes = 2 * CellRunes
	}
	rep, err := Load(r, o)
	if err != nil {
		return err
	}
	if err := Write(w, rep, format); err != nil {
		return err
	}
	return rep.Err()
}
