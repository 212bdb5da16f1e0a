//go:build unix

package supervise

import "golang.org/x/sys/unix"

func nprocLimit() int64  { return rlimit(unix.RLIMIT_NPROC) }
func nofileLimit() int64 { return rlimit(unix.RLIMIT_NOFILE) }

// rlimit is the soft limit of resource; 0 when unlimited or unknown.
func rlimit(resource int) int64 {
	var r unix.Rlimit
	if unix.Getrlimit(resource, &r) != nil || r.Cur == unix.RLIM_INFINITY || r.Cur > 1<<62 {
		return 0
	}
	return int64(r.Cur)
}
