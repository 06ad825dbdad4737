package isolate

import "errors"

// Sentinel errors. Returned wrapped with an operation prefix; test with errors.Is.
var (
	// ErrOverCeiling: a per-request limit exceeds the operator's ceiling;
	// the message names the field.
	ErrOverCeiling = errors.New("limit over the operator ceiling")
	// ErrBadConfig: the configuration is invalid; the message says why.
	ErrBadConfig = errors.New("invalid configuration")
	// ErrBadLimit: a negative or malformed per-request limit.
	ErrBadLimit = errors.New("invalid limit")
	// ErrIsolation: the host cannot give kernels the isolation the
	// configuration asks for (sandbox mode); the message names each missing
	// protection and its fix. The daemon refuses to start.
	ErrIsolation = errors.New("the configured isolation cannot be enforced here")
	// ErrUnknownMode: a request named a mode no profile defines; the
	// message lists the known modes.
	ErrUnknownMode = errors.New("unknown mode")
	// ErrNoUID: every uid of the range is in use.
	ErrNoUID = errors.New("no free kernel uid")
	// ErrAccess: the kernel uid cannot use an interpreter or cwd.
	ErrAccess = errors.New("kernel uid lacks access")
	// ErrReload: a new configuration changes what only a restart applies.
	ErrReload = errors.New("needs a restart")
	// ErrUnsupported: the platform lacks a facility the configuration asked for.
	ErrUnsupported = errors.New("unsupported on this platform")
	// ErrClosed: the isolator was closed.
	ErrClosed = errors.New("isolator closed")
	// ErrReleased: the sandbox was already released.
	ErrReleased = errors.New("sandbox released")
)
