//go:build linux

package supervise

import (
	"fmt"
	"strings"
	"testing"
)

// The inotify limit is named for a crew one agent too big for it, and
// not for one that fits: the crew's size is the one asked for.
func TestLimitsForTheCrewAsked(t *testing.T) {
	v := procInt("/proc/sys/fs/inotify/max_user_instances")
	if v <= 24 {
		t.Skipf("fs.inotify.max_user_instances is %d here: no crew fits", v)
	}
	fits, over := int(v)-24, int(v)-23
	if l := inotify(Limits(fits)); l != nil {
		t.Errorf("Limits(%d) names %v, though %d instances are enough", fits, l, v)
	}
	l := inotify(Limits(over))
	if l == nil || l.Need != v+1 || l.Agents != over {
		t.Fatalf("Limits(%d) = %+v, want the inotify limit %d below a need of %d", over, l, v, v+1)
	}
	if s := l.String(); !strings.Contains(s, fmt.Sprintf("a crew of %d agents", over)) {
		t.Errorf("Limit.String() = %q", s)
	}
}

func inotify(ls []Limit) *Limit {
	for i := range ls {
		if ls[i].Name == "fs.inotify.max_user_instances" {
			return &ls[i]
		}
	}
	return nil
}
