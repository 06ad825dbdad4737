package pool

import (
	"time"

	"github.com/kernpool/kernpool/kernel"
)

// Request is one cell to run in the kernel of its key
// (Owner, Mode, Interpreter, Cwd, sorted Tools).
type Request struct {
	// Owner is the tenant the kernel belongs to ("default" when empty).
	Owner string `json:"owner,omitempty"`
	// Mode selects the kernel's profile (limits, passthrough); "default" when empty.
	Mode string `json:"mode,omitempty"`
	// Interpreter is an absolute path to python3; empty means the pool's default.
	Interpreter string `json:"interpreter,omitempty"`
	// Cwd is the kernel's working directory; empty means its staging dir.
	Cwd string `json:"cwd,omitempty"`
	// Tools is the kernel's tool set; its sorted names are part of the key.
	Tools []string `json:"tools,omitempty"`
	// Session addresses an explicit session (CreateSession): its owner,
	// mode, interpreter, cwd, tools and env apply; a field the request
	// also names must equal the session's (ErrSessionMismatch), an owner
	// other than the session's finds no session (ErrSessionNotFound).
	Session string `json:"session,omitempty"`
	// Env are environment variables for this cell only (env.go).
	Env map[string]string `json:"env,omitempty"`
	// Code is the cell's Python source.
	Code string `json:"code"`
	// Reset discards the kernel's state before running the cell.
	Reset bool `json:"reset,omitempty"`
	// Timeout bounds the cell; zero means the pool's cell timeout, and it
	// is clamped to the pool's maximum.
	Timeout time.Duration `json:"-"`
	// Passthrough names extra environment variables for a new kernel.
	Passthrough []string `json:"passthrough,omitempty"`
	// Limits override the profile's resource limits, within the ceiling.
	Limits Limits `json:"limits,omitempty"`
	// MaxToolCalls is the cell's tool-call budget (0: the pool default, 50).
	MaxToolCalls int `json:"max_tool_calls,omitempty"`
	// Tools calls of this cell go to ToolHandler; nil refuses them.
	ToolHandler ToolHandler `json:"-"`
	// Stream, when set, receives the cell's output and displays as they
	// arrive, cleaned and redacted (at most the inline caps of output);
	// the Result still carries everything. Calls are serialized.
	Stream func(Event) `json:"-"`
}

// Result is a settled cell, in the reference's shape (parity §3).
type Result struct {
	// Status is success, error, timeout or interrupted.
	Status Status `json:"status"`
	// Output is the cleaned output as a reader should see it.
	Output string `json:"output"`
	// ExitCode is 0, 1 for a raised exception, -1 when the kernel was killed.
	ExitCode int `json:"exit_code"`
	// Error explains a non-success status.
	Error string `json:"error,omitempty"`
	// Stdout and Stderr are the cell's two streams apart, cleaned and
	// capped like Output (Stderr without the traceback).
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// Exception is the structured form of the exception a cell raised
	// (status error, or interrupted with the kernel kept).
	Exception *Exception `json:"exception,omitempty"`
	// DurationSeconds is the wall time of the call.
	DurationSeconds float64 `json:"duration_seconds"`
	// ToolCallsMade counts the cell's dispatched tool calls.
	ToolCallsMade int `json:"tool_calls_made"`
	// Kernel describes the kernel that ran the cell.
	Kernel KernelResult `json:"kernel"`
	// StdoutTruncated and the fields below describe output caps.
	StdoutTruncated  bool   `json:"stdout_truncated,omitempty"`
	StdoutBytesTotal int    `json:"stdout_bytes_total,omitempty"`
	StderrTruncated  bool   `json:"stderr_truncated,omitempty"`
	StderrBytesTotal int    `json:"stderr_bytes_total,omitempty"`
	StdoutSpillPath  string `json:"stdout_spill_path,omitempty"`
	// StdoutSpillName names the spill file inside the kernel's spill dir,
	// as GET /v1/kernels/{id}/spill/{name} and `kernpool spill` take it.
	StdoutSpillName string `json:"stdout_spill_name,omitempty"`
	Warning         string `json:"warning,omitempty"`
	// Restored and Lost name, on the first result after a restore, the
	// names the checkpoint brought back and those it could not (they did
	// not pickle or unpickle); Warning says so in words.
	Restored []string `json:"restored,omitempty"`
	Lost     []string `json:"lost,omitempty"`
	// Displays are the cell's rich displays (IPython's display_data:
	// mime type to value, binary as base64), text types redacted.
	Displays []Display `json:"displays,omitempty"`
}

// Status is a settled cell's outcome (Statuses lists them).
type Status string

// Result statuses.
const (
	StatusSuccess     Status = "success"
	StatusError       Status = "error"
	StatusTimeout     Status = "timeout"
	StatusInterrupted Status = "interrupted"
)

// KernelResult is the result's kernel block.
type KernelResult struct {
	ID             string `json:"id"`
	Mode           string `json:"mode"`
	Reused         bool   `json:"reused"`
	ExecutionCount int    `json:"execution_count"`
	StateReset     bool   `json:"state_reset"`
	Ended          bool   `json:"ended"`
	// StatePreserved: the kernel lives on with its variables (false when
	// it was killed, ended or replaced by this call).
	StatePreserved bool `json:"state_preserved"`
	// OOMKilled: the kernel's memory limit killed it during this cell.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// Restored: this is the key's first cell on a new kernel, which got
	// the previous kernel's checkpoint (Result.Restored, Result.Lost).
	Restored bool `json:"restored,omitempty"`
	// Isolation is what was enforced for the kernel (docs/api.md); absent
	// only when no kernel was reached (interrupted while waiting or spawning).
	Isolation *kernel.Isolation `json:"isolation,omitempty"`
}

// KernelInfo describes one live kernel (for ps).
type KernelInfo struct {
	ID          string   `json:"id"`
	Owner       string   `json:"owner"`
	Mode        string   `json:"mode"`
	Interpreter string   `json:"interpreter"`
	Cwd         string   `json:"cwd"`
	Tools       []string `json:"tools"`
	// Session is the explicit session the kernel serves (empty: implicit).
	Session        string    `json:"session,omitempty"`
	Pid            int       `json:"pid"`
	UID            int       `json:"uid"`
	Busy           bool      `json:"busy"`
	ExecutionCount int       `json:"execution_count"`
	IdleSeconds    float64   `json:"idle_seconds"`
	StartedAt      time.Time `json:"started_at"`
	// Isolation is what is enforced for the kernel, as in results.
	Isolation kernel.Isolation `json:"isolation"`
	// Stats come from the kernel's cgroup; absent without one.
	MemoryCurrent int64   `json:"memory_current_bytes,omitempty"`
	MemoryPeak    int64   `json:"memory_peak_bytes,omitempty"`
	Pids          int64   `json:"pids,omitempty"`
	CPUSeconds    float64 `json:"cpu_seconds,omitempty"`
	// DroppedOutputBytes counts output the kernel wrote while none of its
	// cells ran (never delivered to any cell).
	DroppedOutputBytes int64 `json:"dropped_output_bytes"`
	// Spare: a warm spare waiting for a new key (Owner is empty, IdleSeconds
	// counts from its start).
	Spare bool `json:"spare,omitempty"`
}
