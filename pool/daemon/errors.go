package daemon

import (
	"errors"

	"github.com/kernpool/kernpool/pool/api"
)

// Sentinel errors of the daemon. Wrapped with an operation prefix and %w.
var (
	// ErrConfig: the config file or a flag value is invalid.
	ErrConfig = errors.New("invalid configuration")
	// ErrAlreadyServing: another daemon holds the state dir or answers on
	// the socket (one sentinel: api.Listen returns it for the socket).
	ErrAlreadyServing = api.ErrAlreadyServing
	// ErrDrainIncomplete: a drain ended with persist kernels not saved.
	ErrDrainIncomplete = errors.New("drain incomplete")
)
