//go:build unix && !linux

package kernel

// groupRuns counts zombies as members: without /proc they cannot be told
// apart from running processes.
func groupRuns(int) bool { return true }
