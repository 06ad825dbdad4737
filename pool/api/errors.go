package api

import (
	"errors"
	"time"

	"github.com/kernpool/kernpool/pool"
)

// Sentinel errors. Wrapped with an operation prefix and %w; test with errors.Is.
var (
	// ErrUnavailable: no daemon answers on the socket (client side).
	ErrUnavailable = errors.New("kernpool daemon not reachable")
	// ErrAlreadyServing: a live daemon already answers on the socket path.
	ErrAlreadyServing = errors.New("another kernpool is serving")
	// ErrSocket: the socket path cannot be used (not a socket, bad directory).
	ErrSocket = errors.New("unusable socket path")
	// ErrProtocol: the daemon's answer could not be understood (client side).
	ErrProtocol = errors.New("unexpected response from the daemon")
	// ErrBadRequest: the request body was malformed (wire-level; semantic
	// problems come back as pool.ErrBadRequest).
	ErrBadRequest = errors.New("bad request")
	// ErrDraining: the node is draining (client side: CodeDraining).
	ErrDraining = errors.New("the node is draining")
	// ErrForbidden: the credentials are missing or may not do this
	// (client side: CodeUnauthorized, CodeForbidden).
	ErrForbidden = errors.New("not allowed")
)

// Error codes carried in every error body ({"error": ..., "code": ...}).
const (
	CodeBadRequest       = "bad_request"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeCapacity         = "capacity"
	CodeQuota            = "quota"
	CodeClosed           = "closed"
	CodeSpawnFailed      = "spawn_failed"
	CodeInternal         = "internal"
	// CodeConflict (409): the live kernel runs with other limits or
	// passthrough; resend with reset.
	CodeConflict = "conflict"
	// CodeIdle: an interrupt found no cell running on the kernel (409).
	CodeIdle = "idle"
	// CodeBusy: the kernel runs a cell; variables are listed between
	// cells (409).
	CodeBusy = "busy"
	// CodeInterrupted (409): an interrupt (POST .../interrupt, of the
	// kernel, its session or its owner) stopped a variables listing; the
	// kernel keeps its state unless the message says it was killed (a
	// repr that ignored the interrupt past its grace).
	CodeInterrupted = "interrupted"
	// CodeKernelDied (409): the kernel died of its own during a variables
	// listing (a repr that called os._exit, or ran the kernel out of
	// memory: the message says so); its state is lost and the owner's
	// next cell gets a new kernel. The tenant's code, not a daemon
	// failure: a 4xx, which no client retries on its own.
	CodeKernelDied = "kernel_died"
	// CodeTooLarge (413): the request body is over the limit.
	CodeTooLarge = "too_large"
	// CodeTimeout (408): the request body did not arrive in time.
	CodeTimeout = "request_timeout"
	// CodeTimedOut (504): a variables listing outlived its 10 s bound (a
	// slow repr) and was interrupted; the kernel keeps its state unless
	// the message says it was killed.
	CodeTimedOut = "timeout"
	// CodeTooManyConnections (503): the daemon serves its maximum number
	// of client connections.
	CodeTooManyConnections = "too_many_connections"
	// CodeDraining (503, with Retry-After): the node is draining and
	// takes no cells, of new owners or of its own; a router places the
	// owner on another node, where its next cell restores its state.
	CodeDraining = "draining"
	// CodeUnauthorized (401): a network request without valid credentials.
	CodeUnauthorized = "unauthorized"
	// CodeForbidden (403): the credential may not act for the owner, or
	// the endpoint needs an admin credential.
	CodeForbidden = "forbidden"
	// CodeNotSupported (501): the embedding program did not wire the
	// endpoint (drain without a daemon).
	CodeNotSupported = "not_supported"
	// CodeFenced (409): the request's owner generation is older than one
	// the node has seen: the owner was placed on another node since (a
	// router rereads its record and resends).
	CodeFenced = "fenced"
	// CodeNoNode (503, with Retry-After): a fleet's router found no live
	// node that is not draining to place the owner on.
	CodeNoNode = "no_node"
	// CodeNodeFailed (502): the owner's node failed while it served the
	// request through a router (the cell may have run).
	CodeNodeFailed = "node_failed"
)

// APIError is an error answer of the daemon as the client sees it.
// errors.Is maps its code to the pool's sentinels (CodeNotFound is
// pool.ErrNotFound, CodeCapacity pool.ErrCapacity, ...).
type APIError struct {
	// StatusCode is the HTTP status (0 for an error event of a stream).
	StatusCode int
	// Code is one of the Code* constants.
	Code string
	// Message is the daemon's explanation.
	Message string
	// RetryAfter is the daemon's Retry-After hint (capacity, quota); 0 if none.
	RetryAfter time.Duration
}

func (e *APIError) Error() string { return e.Message }

// Unwrap returns the sentinel matching the error code, so callers can
// write errors.Is(err, pool.ErrNotFound).
func (e *APIError) Unwrap() error {
	switch e.Code {
	case CodeBadRequest:
		return pool.ErrBadRequest
	case CodeNotFound:
		return pool.ErrNotFound
	case CodeCapacity:
		return pool.ErrCapacity
	case CodeQuota:
		return pool.ErrQuota
	case CodeClosed:
		return pool.ErrClosed
	case CodeSpawnFailed:
		return pool.ErrSpawn
	case CodeConflict:
		return pool.ErrConflict
	case CodeSessionMismatch:
		return pool.ErrSessionMismatch
	case CodeIdle:
		return pool.ErrIdle
	case CodeBusy:
		return pool.ErrBusy
	case CodeInterrupted:
		return pool.ErrInterrupted
	case CodeKernelDied:
		return pool.ErrKernelDied
	case CodeNoSpace:
		return pool.ErrNoSpace
	case CodeNotRegular:
		return pool.ErrNotRegular
	case CodeTooLarge, CodeTimeout:
		return pool.ErrBadRequest
	case CodeTimedOut:
		return pool.ErrTimeout
	case CodeDraining:
		return ErrDraining
	case CodeFenced:
		return pool.ErrFenced
	case CodeUnauthorized, CodeForbidden:
		return ErrForbidden
	}
	return nil
}
