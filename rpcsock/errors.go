package rpcsock

import "errors"

// Sentinel errors. Returned wrapped with an operation prefix and %w; test
// with errors.Is.
var (
	// ErrUnsupported: the platform lacks a facility the listener needs
	// (Unix sockets or a peer-credential check). Use Network "tcp" there.
	ErrUnsupported = errors.New("unsupported on this platform")
	// ErrInsecureDir: the staging dir is missing, not a directory, a symlink,
	// or reachable by group or others (it must be 0700).
	ErrInsecureDir = errors.New("staging dir is not a private directory")
	// ErrBadConfig: a Config field is out of range.
	ErrBadConfig = errors.New("invalid config")
	// ErrBadToolName: a tool name is empty, too long, not UTF-8, or holds
	// whitespace or control characters.
	ErrBadToolName = errors.New("invalid tool name")
	// ErrPathTooLong: <Dir>/rpc.sock does not fit in a Unix socket address.
	ErrPathTooLong = errors.New("socket path too long")
	// ErrClosed: the server was closed.
	ErrClosed = errors.New("server closed")
	// errHandlerPanic is what a cell sees when its handler panicked.
	errHandlerPanic = errors.New("tool handler failed")
)
