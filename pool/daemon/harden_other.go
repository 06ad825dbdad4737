//go:build !linux

package daemon

// hardenDaemon does nothing where PR_SET_DUMPABLE does not exist.
func hardenDaemon() error { return nil }
