package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/kernpool/kernpool/pool"
)

// ExecuteRequest is the body of POST /v1/execute: the pool.Request fields
// plus the cell timeout and the streaming switch.
type ExecuteRequest struct {
	pool.Request
	// Timeout bounds the cell: a Go duration string ("30s") or a number of
	// seconds; absent or zero means the daemon's cell timeout.
	Timeout Duration `json:"timeout,omitempty"`
	// Stream asks for an NDJSON response carrying the cell's tool calls.
	Stream bool `json:"stream,omitempty"`
}

// Duration is a time.Duration that reads "30s" or 30 (seconds) from JSON
// and writes the Go duration string.
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts a Go duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	const want = `field "timeout": expected a duration string such as "30s" or a number of seconds`
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*d = 0
		return nil
	}
	var v time.Duration
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("%w: %s", ErrBadRequest, want)
		}
		parsed, err := time.ParseDuration(s)
		if err != nil {
			if secs, nerr := strconv.ParseFloat(s, 64); nerr == nil {
				parsed, err = secondsToDuration(secs)
			}
		}
		if err != nil {
			return fmt.Errorf("%w: %s, got %q", ErrBadRequest, want, s)
		}
		v = parsed
	} else {
		secs, err := strconv.ParseFloat(string(b), 64)
		if err != nil {
			return fmt.Errorf("%w: %s, got %s", ErrBadRequest, want, jsonKind(b))
		}
		if v, err = secondsToDuration(secs); err != nil {
			return fmt.Errorf("%w: %s, got %s", ErrBadRequest, want, b)
		}
	}
	if v < 0 {
		return fmt.Errorf("%w: field \"timeout\" must not be negative", ErrBadRequest)
	}
	*d = Duration(v)
	return nil
}

// secondsToDuration refuses what a Duration cannot hold: float64(MaxInt64)
// is 2^63, itself out of range, so the bound is excluded.
func secondsToDuration(secs float64) (time.Duration, error) {
	if math.IsNaN(secs) || math.IsInf(secs, 0) || math.Abs(secs) >= float64(math.MaxInt64)/float64(time.Second) {
		return 0, fmt.Errorf("%w: duration out of range", ErrBadRequest)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// jsonKind names the JSON type of a raw value for error messages.
func jsonKind(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// ToolAnswer is the body of POST /v1/tool-calls/{id}: exactly one of
// Result and Error.
type ToolAnswer struct {
	// Result is the tool's result as the cell will see it.
	Result *string `json:"result,omitempty"`
	// Error makes the call fail in the cell with this message.
	Error *string `json:"error,omitempty"`
}

// Event is one NDJSON line of a streaming execute response.
type Event struct {
	// Event names the line's kind (the Event* constants).
	Event EventName `json:"event"`
	// Text is set for "stdout" and "stderr": the next chunk of output,
	// ANSI-stripped and redacted.
	Text string `json:"text,omitempty"`
	// Display is set for "display".
	Display *pool.Display `json:"display,omitempty"`
	// Call is set for "tool_call".
	Call *pool.ToolCall `json:"call,omitempty"`
	// Result is set for "result".
	Result *pool.Result `json:"result,omitempty"`
	// Error is set for "error"; Code classifies it like an error body.
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
}

// EventName is the kind of one line of a streaming execute response.
type EventName string

// Event names. The output events are the pool's (pool.EventKind).
const (
	EventStdout             = EventName(pool.EventStdout)
	EventStderr             = EventName(pool.EventStderr)
	EventDisplay            = EventName(pool.EventDisplay)
	EventToolCall EventName = "tool_call"
	EventResult   EventName = "result"
	EventError    EventName = "error"
)

// HealthStatus is the daemon's state as GET /v1/health reports it.
type HealthStatus string

// Health statuses.
const (
	// HealthOK: the daemon takes new cells.
	HealthOK HealthStatus = "ok"
	// HealthDraining: shutdown began; running cells finish, new ones are refused.
	HealthDraining HealthStatus = "draining"
)

// Health is the body of GET /v1/health.
type Health struct {
	// Status is HealthOK, or HealthDraining once shutdown began.
	Status HealthStatus `json:"status"`
	// Version is the daemon's version.
	Version string `json:"version"`
	// Kernels is the number of live kernels.
	Kernels int `json:"kernels"`
	// Isolation describes the confinement in use (set by the daemon's wiring).
	Isolation string `json:"isolation"`
	// Goroutines is the daemon's goroutine count (for leak checks).
	Goroutines int `json:"goroutines"`
	// PendingToolCalls counts streamed tool calls awaiting an answer.
	PendingToolCalls int `json:"pending_tool_calls"`
	// Stats are the pool's counters.
	Stats pool.PoolStats `json:"stats"`
	// State is the node's state: ready, draining, drained or not_ready
	// (GET /v1/ready answers 200 only when ready).
	State NodeState `json:"state"`
	// Drain is the drain's progress once one began.
	Drain *DrainStatus `json:"drain,omitempty"`
	// MaxKernels is the node's max_kernels and FreeKernels how many more
	// kernels it may start (spares count as free: a new owner claims
	// one), for a router weighing nodes by free capacity.
	MaxKernels  int `json:"max_kernels,omitempty"`
	FreeKernels int `json:"free_kernels,omitempty"`
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// KernelList is the body of GET /v1/kernels.
type KernelList struct {
	Kernels []pool.KernelInfo `json:"kernels"`
	// Checkpoints are the saved states of stopped kernels of profiles
	// with persist = true (docs/design.md, "Lossless eviction").
	Checkpoints []pool.CheckpointInfo `json:"checkpoints"`
}

// KillResponse is the body of DELETE /v1/kernels/{id}.
type KillResponse struct {
	Killed string `json:"killed"`
}

// InterruptResponse is the body of POST /v1/kernels/{id}/interrupt and
// POST /v1/owners/{owner}/interrupt: the kernels whose cells were
// interrupted.
type InterruptResponse struct {
	Interrupted []string `json:"interrupted"`
}

// ShutdownResponse is the body of POST /v1/owners/{owner}/shutdown.
type ShutdownResponse struct {
	Owner  string `json:"owner"`
	Killed int    `json:"killed"`
}
