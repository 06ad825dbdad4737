package cgroup

import "errors"

// Sentinel errors. Returned wrapped with an operation prefix; test with errors.Is.
var (
	// ErrUnsupported: the host has no usable cgroup facility (not Linux, no
	// cgroupfs mounted, or not writable by this process).
	ErrUnsupported = errors.New("unsupported on this host")
	// ErrForeign: a group exists where the pool wants its parent, and it is
	// not marked as this pool's. The pool never touches it.
	ErrForeign = errors.New("group exists and is not marked as this pool's")
	// ErrTaken: the parent belongs to a kernpool daemon that is still
	// running (it holds its state dir's lock); the message names its state
	// dir. The pool never touches it.
	ErrTaken = errors.New("parent belongs to a running kernpool daemon")
	// ErrNotEmpty: processes remained in a group after the kill deadline.
	ErrNotEmpty = errors.New("group still has processes")
	// ErrInvalidName: a group name that is not a single path element.
	ErrInvalidName = errors.New("invalid group name")
	// ErrClosed: the manager was closed.
	ErrClosed = errors.New("manager closed")
)
