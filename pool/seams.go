package pool

import (
	"context"
	"encoding/json"
	"time"

	"github.com/kernpool/kernpool/kernel"
)

// The pool's seams. Each is a small interface, and the packages that fill
// them (isolate, envscrub, rpcsock; audit and metrics for Observer) are
// adapters that import pool for its seams and satisfy them with pool's own
// types: no shims, no copied types. Each adapter asserts at compile time
// that it satisfies them; pool/daemon (wire.go) only builds and wires them.

// Limits are per-request resource overrides, bounded by the operator's
// ceiling. Zero fields mean "the profile's value".
type Limits struct {
	// MemoryMax is the memory cap in bytes (swap is capped to the same).
	MemoryMax int64 `json:"memory_max,omitempty"`
	// PidsMax caps the number of tasks in the kernel's cgroup.
	PidsMax int64 `json:"pids_max,omitempty"`
	// CPUMax is the CPU quota in cores (0.5 = half a core).
	CPUMax float64 `json:"cpu_max,omitempty"`
}

// SandboxFactory makes the confinement for one new kernel (isolate.Isolator).
type SandboxFactory interface {
	// NewSandbox reserves what one kernel needs (uid, cgroup) for the
	// kernel named id, owned by owner, in mode's profile with the request's
	// overrides applied. The caller releases it via Sandbox.Release after
	// the kernel ends, or by Kill+Release when the spawn fails.
	NewSandbox(id, owner, mode string, limits Limits) (kernel.Sandbox, error)
}

// SandboxStats are a SandboxFactory's housekeeping figures since it
// started, for metrics: the scrub of a kernel uid's leftovers at each
// lease, and the walk at start for the host paths kernels could write.
type SandboxStats struct {
	// UIDScrubs counts the scrubs; ScrubRemoved the entries they removed.
	UIDScrubs, ScrubRemoved int64
	// ScrubBounded counts scrubs that stopped at a bound and ScrubErrors
	// those that met an error (a scrub may do both); their uid was leased
	// anyway, and the next lease's scrub goes on.
	ScrubBounded, ScrubErrors int64
	// HostPathsPrivate counts the host dirs kernels could write that get
	// a private tmpfs in every kernel; HostPathsReadOnly those bound
	// read-only. HostPathDirs is how many dirs the walk looked at and
	// HostPathWalk how long it took (zero without the walk).
	HostPathsPrivate, HostPathsReadOnly, HostPathDirs int
	HostPathWalk                                      time.Duration
}

// SandboxStatser is a SandboxFactory that reports SandboxStats
// (isolate.Isolator).
type SandboxStatser interface {
	SandboxStats() SandboxStats
}

// EnvBuilder builds a kernel's environment from the daemon's (envscrub.Scrubber).
type EnvBuilder interface {
	// Build returns the child environment for a kernel of mode with the
	// request's extra passthrough names, and the values it scrubbed (which
	// output redaction must always mask). A refused passthrough name is an
	// error wrapping envscrub.ErrRefused.
	Build(mode string, passthrough []string) (env []string, scrubbed []string, err error)
}

// OutputFilter turns a kernel's raw output into what may leave the daemon
// (envscrub.Pipeline). One per kernel, since it knows that kernel's secrets.
type OutputFilter interface {
	// Clean strips ANSI and redacts one text.
	Clean(text string) string
	// CapText cleans one text (an error message, a traceback) and caps it
	// like stderr (head and tail kept around the truncation notice).
	CapText(text string) string
	// Finish cleans, caps and (for stdout over the cap) spills one cell's
	// output into spillDir; redaction happens before anything is spilled.
	Finish(stdout, stderr, spillDir string, cell int) (CellOutput, error)
}

// OutputFilterFactory makes the filter of one kernel, knowing the exact
// secret values (scrubbed env values, RPC token) to mask.
type OutputFilterFactory interface {
	ForKernel(secrets []string) OutputFilter
}

// spillCapper is implemented by factories whose filters spill
// (envscrub.Pipeline): each kernel then keeps that much of a cell's
// stdout from its start, so that a spill can hold it.
type spillCapper interface {
	SpillCap() int
}

// Clipped is one stream of a cell as the kernel kept it: all of it (Tail
// empty), or its first bytes and its last ones with Total-len(Head)-
// len(Tail) bytes between them dropped.
type Clipped struct {
	Head  string
	Tail  string
	Total int
}

// clippedFinisher is implemented by filters that finish clipped streams
// (envscrub.Filter): the inline tail and the spill's end are then the
// stream's real end. Without it, Finish gets the streams' heads.
type clippedFinisher interface {
	FinishClipped(stdout, stderr Clipped, spillDir string, cell int) (CellOutput, error)
}

// CellOutput is one cell's cleaned, capped output and its truncation
// metadata.
type CellOutput struct {
	// Stdout is the cleaned stdout, truncated to the inline cap.
	Stdout string
	// Stderr is the cleaned stderr, truncated to the stderr cap.
	Stderr string
	// StdoutTruncated: Stdout lost its middle to the inline cap.
	StdoutTruncated bool
	// StdoutBytesTotal is the cleaned stdout's size before truncation.
	StdoutBytesTotal int
	// StderrTruncated: Stderr lost its middle to the stderr cap.
	StderrTruncated bool
	// StderrBytesTotal is the cleaned stderr's size before truncation.
	StderrBytesTotal int
	// SpillPath names the file holding the full (redacted) stdout.
	SpillPath string
	// Warning tells the reader where the full output went, or why it
	// could not be saved.
	Warning string
}

// ToolCall is one tool invocation a cell made through kernpool_tools.
type ToolCall struct {
	// ID is unique per daemon; the API client answers by it.
	ID string `json:"id"`
	// Tool is the tool's name (one of the kernel's tool set).
	Tool string `json:"tool"`
	// Args are the call's arguments as the cell passed them (a JSON
	// object, {} when none).
	Args json.RawMessage `json:"args"`
}

// ToolHandler answers the tool calls of the cells its caller submits. A
// gateway embedding the pool implements it; the daemon forwards calls to its
// API client. The returned string is the tool's result as the cell sees it;
// an error reaches the cell as its text. ctx ends when the cell settles or
// the listener closes, and a handler must return soon after.
type ToolHandler interface {
	HandleTool(ctx context.Context, call ToolCall) (string, error)
}

// ToolHandlerFunc adapts a function to ToolHandler.
type ToolHandlerFunc func(ctx context.Context, call ToolCall) (string, error)

// HandleTool calls f.
func (f ToolHandlerFunc) HandleTool(ctx context.Context, call ToolCall) (string, error) {
	return f(ctx, call)
}

// ToolServer is one kernel's tool-RPC listener (rpcsock.Server).
type ToolServer interface {
	// Endpoint is what the kernel dials: a socket path, or tcp://127.0.0.1:PORT.
	Endpoint() string
	// Token is the kernel's RPC token (also masked from output).
	Token() string
	// BeginCell installs h as the authority for the next cell's calls with
	// the given budget; the returned func retires it and reports how many
	// calls were dispatched. A call with no active cell is refused.
	BeginCell(h ToolHandler, budget int) (end func() (callsMade int))
	// Close stops the listener and removes its socket. Idempotent.
	Close() error
}

// ToolServerFactory opens the tool listener of one kernel inside its
// staging dir (owned by uid when uid >= 0), serving the named tools.
type ToolServerFactory interface {
	Listen(staging string, uid int, tools []string) (ToolServer, error)
	// Stub is the generated kernpool_tools.py for that tool set.
	Stub(tools []string) []byte
}
