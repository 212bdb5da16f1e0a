package crew

import "errors"

// Exit codes, one per sentinel error (docs/cli.md, Exit codes). Code maps
// an error to its code and class; the command line exits with the code,
// and crew mcp's tool results and the dashboard name the class.
const (
	ExitOK          = 0
	ExitIO          = 1
	ExitInvalid     = 2
	ExitConflict    = 3
	ExitNotFound    = 4
	ExitTimeout     = 5
	ExitIncomplete  = 6
	ExitDamaged     = 7
	ExitTampered    = 8
	ExitDenied      = 9
	ExitInterrupted = 130 // 128 + SIGINT, as shells report a command Ctrl-C ended
)

// classes maps each sentinel to its exit code and class name, in the
// order Code tests them (ErrTampered before ErrDamaged: a tampered root
// may be reported as damaged too).
var classes = []struct {
	err   error
	exit  int
	class string
}{
	{ErrInvalid, ExitInvalid, "invalid"},
	{ErrConflict, ExitConflict, "conflict"},
	{ErrNotFound, ExitNotFound, "not_found"},
	{ErrTimeout, ExitTimeout, "timeout"},
	{ErrIncomplete, ExitIncomplete, "incomplete"},
	{ErrTampered, ExitTampered, "tampered"},
	{ErrDamaged, ExitDamaged, "damaged"},
	{ErrDenied, ExitDenied, "denied"},
}

// Code returns the exit code and class of err: ExitOK and "" for nil,
// the sentinel's code and class (invalid, conflict, not_found, timeout,
// incomplete, tampered, damaged, denied) for an error wrapping one, else ExitIO
// and "io". It is the one place an error gets its code.
func Code(err error) (exit int, class string) {
	if err == nil {
		return ExitOK, ""
	}
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return c.exit, c.class
		}
	}
	return ExitIO, "io"
}

// Message is err's text without the sentinel's own words at its end
// ("...: conflict"), which the exit code or class already says.
func Message(err error) string {
	s := err.Error()
	for _, c := range classes {
		suffix := ": " + c.err.Error()
		if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix {
			return s[:len(s)-len(suffix)]
		}
	}
	return s
}
