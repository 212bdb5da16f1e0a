package crew

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// idRule is the identifier rule of docs/concepts.md (Identifiers) as the regexp it is written as;
// ValidateID spells it out by hand (a regexp costs start-up time).
var idRule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

func TestValidateID(t *testing.T) {
	for _, id := range []string{"a", "r1", "T-1_x", "0", strings.Repeat("a", 64), "A_", "z-"} {
		if err := ValidateID("task", id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		}
	}
	for _, id := range []string{"", "..", "a/b", "/abs", "-a", "_a", "a.b", "a b", "a\x00", "a\n", strings.Repeat("a", 65), "é", "a*"} {
		if err := ValidateID("task", id); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateID(%q) = %v, want ErrInvalid", id, err)
		}
	}
}

// FuzzValidateID: the hand-written check agrees with the rule's regexp.
func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"a", "a-b_c", "", "-", "a.b", strings.Repeat("x", 64), strings.Repeat("x", 65), "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := ValidateID("run", id) == nil, idRule.MatchString(id); got != want {
			t.Fatalf("ValidateID(%q) accepts: %v; the rule's regexp: %v", id, got, want)
		}
	})
}
