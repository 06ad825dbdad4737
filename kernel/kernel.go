package kernel

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// drainGrace bounds how long teardown waits for the output pipes to reach
// EOF after the kernel's tree was killed. Only a process that escaped the
// sandbox (a setsid child under the process-group sandbox) can hold them
// open longer; what the dead tree wrote is read without waiting.
const drainGrace = 500 * time.Millisecond

// closedStdoutGrace is how long a kernel whose stdout ended may take to
// exit on its own (so its exit status, not a guess, explains it) before it
// is killed as a protocol violation.
const closedStdoutGrace = time.Second

// Kernel is one live Python kernel: a runner process in its sandbox, its
// pipes and staging dir. Exec runs one cell at a time; every other method is
// safe for concurrent use.
type Kernel struct {
	id       string
	staging  string
	home     bool // HOME is staging/tmp: the staging dir is the sandbox's own tmpfs
	log      hclog.Logger
	cmd      *exec.Cmd
	sb       Sandbox
	stdin    *os.File
	stdinW   *pipeWriter // stdin's raw writes (nil: none)
	stdoutR  *os.File
	stderrR  *os.File
	sentinel string
	maxFrame int64
	caps     frameCaps // the decoder's member caps
	tailCap  int       // Spec.TailBytes
	capsEnv  string    // EnvOutputCaps' value
	cell     *cellState
	ckptIn   ckptSink // a save's blob, from C frames (checkpoint.go)

	busy atomic.Bool
	seq  int        // cells sent; guarded by busy
	req  reqEncoder // Exec's request buffer; guarded by busy
	// ops counts bind and preload requests; bound is set by Bind; env is
	// the environment the runner's os.environ holds (before its own
	// changes). All guarded by busy.
	ops   int
	bound bool
	env   []string

	exited    chan struct{} // closed once the runner process was reaped
	stdoutEOF chan struct{} // closed when the stdout reader stopped
	done      chan struct{} // closed once everything is released
	readers   sync.WaitGroup

	mu       sync.Mutex
	cause    error // the first reason the kernel died
	released bool  // Sandbox.Release ran: the sandbox must not be killed again
	verdict  Verdict
}

// Kill kills the kernel's whole tree and returns once it is reaped,
// released and its staging dir is removed. It is idempotent and safe to call
// concurrently, also while Exec runs (that Exec then returns an error) and
// after the kernel died on its own.
func (k *Kernel) Kill() error {
	k.terminate(fmt.Errorf("killed: %w", ErrClosed))
	<-k.done
	return nil
}

// terminate records cause (unless an earlier one exists) and kills the tree.
// The reaper does the rest of the teardown.
func (k *Kernel) terminate(cause error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cause == nil {
		k.cause = cause
	}
	if k.released {
		return
	}
	if err := k.sb.Kill(); err != nil {
		k.log.Warn("sandbox kill failed", "id", k.id, "error", err)
	}
}

// Done is closed once the kernel is dead and released.
func (k *Kernel) Done() <-chan struct{} { return k.done }

// Err says why the kernel died (a *DeathError, ErrTimeout, ErrCanceled,
// ErrProtocol or ErrClosed, wrapped); nil while it is alive.
func (k *Kernel) Err() error {
	select {
	case <-k.done:
	default:
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cause
}

// ID is the kernel's id (Spec.ID).
func (k *Kernel) ID() string { return k.id }

// Pid is the runner process id.
func (k *Kernel) Pid() int { return k.cmd.Process.Pid }

// DroppedOutput counts the fd-level stdout and stderr bytes the kernel
// wrote while none of its cells ran (a thread an earlier cell left
// running): they reach no cell's result.
func (k *Kernel) DroppedOutput() int64 { return k.cell.dropped.Load() }

// StagingDir is <StateDir>/kernels/<ID>; it no longer exists once Done is closed.
func (k *Kernel) StagingDir() string { return k.staging }

// Stats reads live resource figures from the sandbox (zero without a cgroup).
func (k *Kernel) Stats() (Stats, error) {
	st, err := k.sb.Stats()
	if err != nil {
		return st, fmt.Errorf("kernel stats: %w", err)
	}
	return st, nil
}

// Isolation is what the sandbox enforces for this kernel.
func (k *Kernel) Isolation() Isolation { return k.sb.Isolation() }

// Verdict is the sandbox's verdict once the kernel is released (zero before).
func (k *Kernel) Verdict() Verdict {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.verdict
}

// reap waits for the runner to exit, then tears everything down: the rest
// of the tree, the pipes (after the readers drained them), the sandbox, the
// staging dir. It is the only goroutine that closes done.
func (k *Kernel) reap() {
	waitErr := k.cmd.Wait()
	close(k.exited)
	k.terminate(nil) // the rest of the tree; keeps an earlier cause
	past := time.Unix(1, 0)
	_ = k.stdin.SetWriteDeadline(past) // unblock a writer stuck on a full pipe
	drainBy := time.Now().Add(drainGrace)
	_ = k.stdoutR.SetReadDeadline(drainBy)
	_ = k.stderrR.SetReadDeadline(drainBy)
	k.readers.Wait()
	_ = k.stdin.Close()
	_ = k.stdoutR.Close()
	_ = k.stderrR.Close()

	k.mu.Lock()
	k.released = true
	k.mu.Unlock()
	verdict, relErr := k.sb.Release()
	if relErr != nil {
		k.log.Warn("sandbox release failed", "id", k.id, "error", relErr)
	}
	death := deathError(k.cmd.ProcessState, waitErr, verdict, k.cell.stderrTail())
	if err := os.RemoveAll(k.staging); err != nil {
		k.log.Warn("cannot remove staging dir", "id", k.id, "error", err)
	}

	k.mu.Lock()
	k.verdict = verdict
	if k.cause == nil || verdict.OOMKilled {
		k.cause = death
	}
	k.mu.Unlock()
	k.log.Debug("kernel ended", "id", k.id, "reason", death.Error())
	close(k.done)
}

// deathError explains how the runner ended.
func deathError(ps *os.ProcessState, waitErr error, v Verdict, stderr string) *DeathError {
	d := &DeathError{ExitCode: -1, OOMKilled: v.OOMKilled, Stderr: stderr}
	if v.OOMKilled {
		d.MemoryLimit = v.MemoryLimit
	}
	if ps == nil {
		d.Signal = "unknown (" + fmt.Sprint(waitErr) + ")"
		return d
	}
	d.ExitCode, d.Signal = exitStatus(ps)
	if v.Reported { // the init's status only mirrors the interpreter's
		d.ExitCode, d.Signal = v.ExitCode, v.Signal
	}
	return d
}
