package pool

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Execute, Kill and New wrap them with a message naming
// the problem; test with errors.Is.
var (
	// ErrClosed: the pool is closed (or draining) and takes no new cells.
	ErrClosed = errors.New("pool closed")
	// ErrNotFound: no live kernel has the given id.
	ErrNotFound = errors.New("no such kernel")
	// ErrBadRequest: a request or config field is invalid; the message names it.
	ErrBadRequest = errors.New("bad request")
	// ErrCapacity: MaxKernels live kernels exist and every one of them is
	// running a cell, so a new kernel can neither be added nor make room by
	// evicting an idle one (or the idle ones need a save while MaxKernels
	// evicted kernels are being saved already). The pool refuses rather
	// than exceed the cap or queue without bound, or behind another
	// tenant's save; callers retry later.
	ErrCapacity = errors.New("every live kernel is busy and the kernel cap is reached")
	// ErrQuota: the owner is over a per-owner quota (Config.Quotas); the
	// error is a *QuotaError saying when to retry.
	ErrQuota = errors.New("owner over quota")
	// ErrUnknownMode: a request named a mode that is not configured
	// (Config.Modes); the error is an *UnknownModeError, which is also an
	// ErrBadRequest.
	ErrUnknownMode = errors.New("unknown mode")
	// ErrSpawn: a new kernel could not be started (interpreter, sandbox,
	// environment or tool listener failure).
	ErrSpawn = errors.New("kernel spawn failed")
	// ErrConflict: the request asks for limits or passthrough names other
	// than those its live kernel runs with; Request.Reset restarts the
	// kernel with the request's.
	ErrConflict = errors.New("the live kernel runs with other settings")

	// errNoToolHandler answers the tool calls of a cell whose request
	// carried no ToolHandler.
	// ErrIdle: an interrupt found no cell running on the kernel.
	ErrIdle = errors.New("no cell is running on the kernel")
	// ErrBusy: the kernel runs a cell (variables are listed between cells).
	ErrBusy = errors.New("the kernel is running a cell")
	// ErrTimeout: a variables listing outlived its bound (a slow repr):
	// it was interrupted, and the kernel keeps its state unless the
	// message says it was killed (a repr that ignored the interrupt).
	ErrTimeout = errors.New("timed out")
	// ErrInterrupted: an explicit interrupt (Interrupt, InterruptOwner)
	// stopped a variables listing (a slow repr); as for ErrTimeout, the
	// kernel keeps its state unless the message says it was killed (a
	// repr that ignored the interrupt past its grace).
	ErrInterrupted = errors.New("the listing was interrupted")
	// ErrKernelDied: the kernel died of its own during a variables
	// listing (a repr that called os._exit, or ran it out of memory: the
	// message says so); its state is lost and the owner's next cell gets
	// a new kernel.
	ErrKernelDied = errors.New("the kernel died during the listing")

	// ErrSessionMismatch: a request addressed to a session names a mode,
	// interpreter, cwd or tool set other than the session's (a session's
	// key is fixed; sessions.go).
	ErrSessionMismatch = errors.New("the request differs from its session")
	// ErrSessionNotFound: no session of the request's owner has the id.
	// It also matches ErrNotFound.
	ErrSessionNotFound = errors.New("no such session")

	errNoToolHandler = errors.New("tool calls are not available for this request: it has no tool handler")
)

// UnknownModeError is the error of a request naming a mode the pool does
// not know. errors.Is matches ErrUnknownMode and ErrBadRequest (HTTP 400).
type UnknownModeError struct {
	// Mode is the mode the request named.
	Mode string
	// Known are the configured modes, sorted.
	Known []string
}

func (e *UnknownModeError) Error() string {
	return fmt.Sprintf("mode %q is not configured; known modes: %s", e.Mode, strings.Join(e.Known, ", "))
}

// Is makes errors.Is(err, ErrUnknownMode) and errors.Is(err, ErrBadRequest) hold.
func (e *UnknownModeError) Is(target error) bool {
	return target == ErrUnknownMode || target == ErrBadRequest
}

// classified is an error whose message is its cause's alone and which also
// matches a sentinel (its class) under errors.Is: where the cause already
// says what is wrong, the class is carried in the chain, not repeated in
// the text (the API turns it into an error code).
type classified struct{ cause, class error }

func (e classified) Error() string   { return e.cause.Error() }
func (e classified) Unwrap() []error { return []error{e.cause, e.class} }

// badRequest classifies err as ErrBadRequest without adding to its message.
func badRequest(err error) error { return classified{cause: err, class: ErrBadRequest} }
