//go:build !linux

package mailbox

// createUnnamed reports false: unnamed files (O_TMPFILE) are Linux's;
// create writes a named temp file.
func (d *AgentDir) createUnnamed(name string, data []byte) (bool, error) { return false, nil }
