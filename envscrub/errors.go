package envscrub

import "errors"

// Sentinel errors. Wrapped with an operation prefix and %w; test with errors.Is.
var (
	// ErrRefused: a passthrough name is on the refusal list (or reserved);
	// the error text names the variable and the rule that refused it.
	ErrRefused = errors.New("refused")
	// ErrInvalidName: a variable name or refusal pattern is empty or holds a
	// character no environment name may hold ('=', NUL, whitespace).
	ErrInvalidName = errors.New("invalid variable name")
	// ErrInvalidArgument: a caller passed a value outside its domain
	// (a negative cell number).
	ErrInvalidArgument = errors.New("invalid argument")
)
