package daemon

import "errors"

// Sentinel errors of the CLI. Wrapped with an operation prefix and %w.
var (
	// ErrConfig: the config file or a flag value is invalid.
	ErrConfig = errors.New("invalid configuration")
	// ErrAlreadyServing: another daemon holds the state dir.
	ErrAlreadyServing = errors.New("another kernpool is serving")
)
