package kernel

import (
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/units"
)

// This file is the contract between kernel and the packages around it
// (pool drives it, isolate implements Sandbox, envscrub builds Spec.Env,
// rpcsock contributes Spec.Files). Change it only together with its users.

// Sentinel errors. Wrapped with an operation prefix and %w; test with errors.Is.
var (
	// ErrTimeout: the cell exceeded its deadline; the kernel was killed and its state is lost.
	ErrTimeout = errors.New("cell timed out")
	// ErrCanceled: the caller canceled the cell; the kernel was killed and its state is lost.
	ErrCanceled = errors.New("cell canceled")
	// ErrProtocol: the kernel broke the wire protocol (non-object frame,
	// oversized frame, bad header). The kernel is killed.
	ErrProtocol = errors.New("protocol error")
	// ErrClosed: the kernel was already killed or has exited.
	ErrClosed = errors.New("kernel ended")
	// ErrBusy: Exec was called while another cell runs (callers serialize).
	ErrBusy = errors.New("busy")
	// ErrUnsupported: the platform lacks a facility the spec asked for.
	ErrUnsupported = errors.New("unsupported on this platform")
	// ErrInterrupted: Interrupt stopped the cell (alone, the kernel was
	// kept; as Exec's error, the cell outlived the grace and the kernel
	// was killed).
	ErrInterrupted = errors.New("cell interrupted")
	// ErrIdle: Interrupt found no cell running.
	ErrIdle = errors.New("no cell is running")
)

// DeathError says why a kernel process ended while a cell ran (or between
// cells). It is never a bare exit status: OOM kills are read from the cgroup,
// signals and exit codes from the wait status.
type DeathError struct {
	// ExitCode is the process exit code, or -1 when it was killed by a signal.
	ExitCode int
	// Signal is the terminating signal's name ("SIGKILL"), empty if it exited.
	Signal string
	// OOMKilled is true only when the cgroup's memory accounting says the
	// kernel hit its memory limit (never guessed from SIGKILL).
	OOMKilled bool
	// MemoryLimit is the limit in bytes that was hit, when OOMKilled.
	MemoryLimit int64
	// Stderr is the (bounded) tail of the kernel's stderr at death.
	Stderr string
}

func (e *DeathError) Error() string {
	switch {
	case e.OOMKilled:
		return fmt.Sprintf("the kernel was killed by the out-of-memory killer at its memory limit of %s", units.FormatBytes(e.MemoryLimit))
	case e.Signal != "":
		return "the kernel died from signal " + e.Signal
	default:
		return fmt.Sprintf("the kernel exited with code %d", e.ExitCode)
	}
}

// Verdict is what the sandbox learned about a kernel after it was reaped.
type Verdict struct {
	// OOMKilled: the memory controller killed a process of the kernel.
	OOMKilled bool
	// MemoryLimit is the memory limit in bytes (0 when none).
	MemoryLimit int64
	// Reported: an init step stood between kernel and the interpreter and
	// saw how the interpreter ended; ExitCode (-1 when signaled) and Signal
	// ("SIGKILL") then replace the wait status of the process kernel started.
	Reported bool
	ExitCode int
	Signal   string
}

// Stats are live resource figures of one kernel, from its cgroup.
type Stats struct {
	MemoryCurrent int64         `json:"memory_current_bytes"`
	MemoryPeak    int64         `json:"memory_peak_bytes"`
	Pids          int64         `json:"pids"`
	CPUTime       time.Duration `json:"cpu_time_ns"`
}

// StagingMounter is a Sandbox that gives each staging dir a filesystem of
// its own (package isolate: a tmpfs of the kernel's tmp_size with bounded
// inodes), so that what the kernel writes there, its TMPDIR included, is
// capped and gone with it instead of spending the host's disk and inodes.
// Start calls MountStaging right after creating the empty staging dir;
// the sandbox's Release undoes it. When it mounted one, the kernel's HOME
// is its TMPDIR too: what programs keep in ~ is capped and private as well.
type StagingMounter interface {
	MountStaging(staging string) (mounted bool, err error)
}

// Sandbox confines one kernel. Package isolate provides the implementations
// (cgroup + uid + namespaces, or process group only: ProcessGroup, the one
// process-group sandbox, is also what Start uses when Spec.Sandbox is nil);
// kernel calls it on its
// single spawn path and on every teardown path.
type Sandbox interface {
	// Prepare runs after the staging dir and its files exist and before the
	// child starts. It sets cmd.SysProcAttr (process group, credentials,
	// cgroup fd, namespaces), may append KERNPOOL_* entries to cmd.Env that
	// the runner consumes before user code (rlimits, self-placement paths),
	// and chowns the staging dir tree to the kernel's uid. It may wrap cmd
	// in an init step (cmd.Path, cmd.Args, cmd.ExtraFiles) that execs the
	// interpreter with cmd's original arguments, directory and environment.
	Prepare(cmd *exec.Cmd, staging string) error
	// Started runs right after the child started, with its pid. An error
	// (e.g. an init step that could not confine the kernel) fails the start.
	Started(pid int) error
	// Kill kills every process of the kernel: the whole cgroup where there is
	// one, else the process group. Idempotent and safe to call concurrently.
	Kill() error
	// Release runs once, after the main process was reaped: it waits until
	// nothing of the kernel remains, removes its cgroup, frees its uid, and
	// reports whether the memory limit killed it.
	Release() (Verdict, error)
	// Stats reads live resource figures; zero values where unknown.
	Stats() (Stats, error)
	// UID is the uid the kernel runs as (-1: the daemon's own).
	UID() int
	// Isolation reports what is enforced for the kernel: its uid, its
	// namespaces, seccomp, the limits its cgroup really has, network.
	Isolation() Isolation
}

// Environment variables the runner reads and deletes from os.environ
// before the first cell, so no cell can see them. The two secrets are the
// exception: EnvSentinel and EnvRPCToken never reach the child's
// environment (which /proc/self/environ would keep showing); Start strips
// them from Spec.Env and Setup's env and sends them on the request pipe as
// the runner's bootstrap line.
const (
	// EnvSentinel names the per-kernel frame sentinel (bootstrap line only).
	EnvSentinel = "KERNPOOL_SENTINEL"
	// EnvCgroupProcs lists cgroup.procs files (os.PathListSeparator-separated)
	// the runner writes "0" into before anything else: race-free placement
	// on cgroup v1, where clone3(CLONE_INTO_CGROUP) does not exist.
	EnvCgroupProcs = "KERNPOOL_CGROUP_PROCS"
	// EnvCgroupKill is a cgroup.kill file the runner writes "1" to when its
	// host dies (stdin EOF), so the whole tree goes, not only the group.
	EnvCgroupKill = "KERNPOOL_CGROUP_KILL"
	// EnvRlimits is "core=0:0,nofile=1024:1024" (soft:hard), set before user code.
	EnvRlimits = "KERNPOOL_RLIMITS"
	// EnvNoNewPrivs "1" makes the runner set PR_SET_NO_NEW_PRIVS before user code.
	EnvNoNewPrivs = "KERNPOOL_NO_NEW_PRIVS"
	// EnvRPCEndpoint and EnvRPCToken reach kernpool_tools through the
	// runner's private module _kernpool_runtime (attributes rpc_endpoint,
	// rpc_token), never through os.environ; the token travels on the
	// bootstrap line.
	EnvRPCEndpoint = "KERNPOOL_RPC_ENDPOINT"
	EnvRPCToken    = "KERNPOOL_RPC_TOKEN"
	// EnvKernelID names the kernel to its cells (it stays in os.environ).
	EnvKernelID = "KERNPOOL_KERNEL_ID"
)

// Spec says how to start one kernel. The pool builds it.
type Spec struct {
	// ID names the kernel, its staging dir and its cgroup ("k" + 16 hex).
	ID string
	// Interpreter is the absolute path of the python3 to run.
	Interpreter string
	// Cwd is the working directory; empty means the staging dir.
	Cwd string
	// Env is the complete child environment as built by envscrub, without
	// the kernel's own variables (kernel adds KERNPOOL_SENTINEL, TMPDIR, ...).
	Env []string
	// StateDir is the pool-owned directory under which the staging dir
	// <StateDir>/kernels/<ID> (0700) is created; it is removed at teardown.
	StateDir string
	// Files are extra files written into the staging dir (0600) before
	// start, e.g. the generated kernpool_tools.py.
	Files map[string][]byte
	// Setup, when set, runs after the staging dir and Files exist and before
	// Sandbox.Prepare (which chowns the tree): the pool opens the kernel's
	// tool socket there. Its env entries are appended to the child's.
	Setup func(staging string) (env []string, err error)
	// Sandbox confines the kernel; nil means a plain process group. Start
	// owns it: on any error from Start it has been killed and released.
	Sandbox Sandbox
	// MaxFrameBytes caps one reply frame (default DefaultMaxFrameBytes,
	// the runner's worst case), checked from the header before any of the
	// body is read; the body is then decoded as it streams, each member
	// capped, within the kernel's Budget.
	MaxFrameBytes int64
	// StdoutCap caps the Python-level stdout the runner returns from a
	// cell's start, in UTF-8 bytes (default CaptureChars); the pool sets
	// it to the spill cap, so that a spill can hold that much.
	StdoutCap int
	// RawStdoutCap caps the fd-level stdout kept from a cell's start
	// (default 1 MB).
	RawStdoutCap int
	// StderrCap caps the stderr kept from a cell's start, Python-level
	// and fd-level each (default 1 MB).
	StderrCap int
	// TailBytes is how much of the end of each stream (Python-level and
	// fd-level stdout and stderr) is kept beyond its cap (default
	// DefaultTailBytes): Reply's StdoutTail and StderrTail.
	TailBytes int
	// Logger receives the kernel's logs; nil discards them.
	Logger hclog.Logger
}

// Cell is one execution request.
type Cell struct {
	// Code is the Python source of the cell.
	Code string
	// Stream, when set, receives the cell's output and displays as they
	// arrive (raw bytes, from the reader goroutines, possibly
	// concurrently; it must not block for long). Python-level output is
	// then written through live instead of returned in the reply frame.
	Stream func(Event)
	// Grace is how long an interrupted cell may take to end before the
	// kernel is killed (0: DefaultInterruptGrace).
	Grace time.Duration
	// KillOnTimeout kills the kernel at once when ctx's deadline passes
	// (timeout_action "kill"); a cancellation and Interrupt still
	// interrupt first.
	KillOnTimeout bool
	// Env are environment variables set in os.environ for this cell only:
	// the runner restores each name's previous value (or its absence)
	// when the cell ends. The caller vets the names.
	Env map[string]string
}

// Exception is a cell's exception as Jupyter's error message carries it:
// the class name, its str() and the traceback entries (a header, one
// entry per frame, the exception line), whose concatenation is the
// traceback text. kernpool's own frames are left out and the staging
// dir's path is replaced by StagingName; nothing is redacted yet.
type Exception struct {
	EName     string
	EValue    string
	Traceback []string
}

// StagingName replaces the staging dir's path in tenant-visible error
// texts (the runner's _kernpool_errors.STAGING_NAME).
const StagingName = "<kernel-dir>"

// ReplyStatus is the runner's verdict on a cell (the "status" member of its
// reply frame, parity §3).
type ReplyStatus string

// Runner verdicts. A reply frame with any other status is a protocol error.
const (
	// ReplyOK: the cell ran to its end.
	ReplyOK ReplyStatus = "ok"
	// ReplyError: the cell raised; the kernel and its state are kept.
	ReplyError ReplyStatus = "error"
	// ReplyExit: the cell called sys.exit; the kernel ends.
	ReplyExit ReplyStatus = "exit"
)

// Known reports whether s is one of the runner verdicts above.
func (s ReplyStatus) Known() bool {
	switch s {
	case ReplyOK, ReplyError, ReplyExit:
		return true
	}
	return false
}

// Reply is a settled cell as the runner reported it plus the fd-level bytes
// the host attributed to it. Nothing here is redacted yet. When Exec fails
// (timeout, cancel, death) it may still return a Reply with an empty Status
// holding the fd-level output the cell wrote before it was killed.
type Reply struct {
	// Status is the runner's verdict.
	Status ReplyStatus
	// Stdout is the cell's stdout (Python-level, then fd-level bytes) from
	// its start: all of it, or when StdoutClipped what the caps kept of
	// its start; StdoutTail is then its end (Spec.TailBytes), and the
	// StdoutBytesTotal-len(Stdout)-len(StdoutTail) bytes between the two
	// were dropped.
	Stdout     string
	StdoutTail string
	// StdoutClipped: bytes between Stdout and StdoutTail were dropped.
	StdoutClipped bool
	// StdoutBytesTotal is the stream's size before any clipping.
	StdoutBytesTotal int
	// Stderr, StderrTail, StderrClipped and StderrBytesTotal are the same
	// for stderr.
	Stderr           string
	StderrTail       string
	StderrClipped    bool
	StderrBytesTotal int
	// Traceback is the formatted exception for ReplyError and ReplyExit.
	Traceback string
	// Exception is the structured form of ReplyError's exception (nil
	// otherwise, and from a runner that does not send it).
	Exception *Exception
	// ExitCode is the sys.exit code for ReplyExit.
	ExitCode int
	// ExecutionCount is the kernel's cell counter after this cell.
	ExecutionCount int
	// Duration is the wall time from request write to settled reply.
	Duration time.Duration
	// Displays are the cell's rich displays, in order.
	Displays []Display
	// DisplaysDropped counts displays the runner dropped at their caps.
	DisplaysDropped int
	// Interrupted is why the cell was interrupted and the kernel kept
	// (ErrTimeout, ErrCanceled or ErrInterrupted), nil when it was not.
	Interrupted error
}
