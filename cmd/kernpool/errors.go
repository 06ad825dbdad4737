package main

import "errors"

// Sentinel errors of the CLI. Wrapped with an operation prefix and %w.
var (
	// ErrConfig: the config file or a flag value is invalid.
	ErrConfig = errors.New("invalid configuration")
	// ErrUsage: the command line is wrong (unknown flag, missing argument).
	ErrUsage = errors.New("usage")
	// ErrUnsupported: the platform lacks a facility the command needs.
	ErrUnsupported = errors.New("unsupported on this platform")
	// ErrAlreadyServing: another daemon answers on the socket.
	ErrAlreadyServing = errors.New("another kernpool is serving")
)
