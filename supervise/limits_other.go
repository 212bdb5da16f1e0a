//go:build !unix

package supervise

func nprocLimit() int64  { return 0 }
func nofileLimit() int64 { return 0 }
