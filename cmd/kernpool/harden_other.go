//go:build !linux

package main

// hardenDaemon does nothing where PR_SET_DUMPABLE does not exist.
func hardenDaemon() error { return nil }
