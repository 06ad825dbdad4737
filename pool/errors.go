package pool

import "errors"

// Sentinel errors. Execute, Kill and New wrap them with a message naming
// the problem; test with errors.Is.
var (
	// ErrClosed: the pool is closed (or draining) and takes no new cells.
	ErrClosed = errors.New("pool: closed")
	// ErrNotFound: no live kernel has the given id.
	ErrNotFound = errors.New("pool: no such kernel")
	// ErrBadRequest: a request or config field is invalid; the message names it.
	ErrBadRequest = errors.New("pool: bad request")
	// ErrCapacity: MaxKernels live kernels exist and every one of them is
	// running a cell, so a new kernel can neither be added nor make room by
	// evicting an idle one. The pool refuses rather than exceed the cap or
	// queue without bound; callers retry later.
	ErrCapacity = errors.New("pool: every live kernel is busy and the kernel cap is reached")
	// ErrSpawn: a new kernel could not be started (interpreter, sandbox,
	// environment or tool listener failure).
	ErrSpawn = errors.New("pool: kernel spawn failed")

	// errNoToolHandler answers the tool calls of a cell whose request
	// carried no ToolHandler.
	errNoToolHandler = errors.New("tool calls are not available for this request: it has no tool handler")
)
