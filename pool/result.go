package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/units"
)

// StderrSeparator joins a failed or noisy cell's stdout and its stderr
// (and traceback) in Result.Output, as the reference does (parity §3).
const StderrSeparator = "\n--- stderr ---\n"

// Texts of the Result, worded as the reference words them (parity §3).
const (
	msgInterrupted    = "Interrupted; the session kernel was killed and its state was lost."
	msgStateKept      = "Its variables and imports survived: the session kernel keeps its state."
	msgWaitAbandoned  = "Interrupted while waiting for the session kernel; the cell did not run and the kernel's state is intact."
	msgException      = "Cell raised an exception."
	msgStateLostTail  = "its state was lost. The next call starts a fresh kernel."
	timeoutMarker     = "⏰ "
	interruptedMarker = "[execution interrupted]"
)

// cellState is what result assembly needs to know about one cell.
type cellState struct {
	rq    normalized
	lv    *live
	start time.Time
	use   kernelUse
	calls int
	reply *kernel.Reply // nil when Exec returned no reply
	count int           // execution_count to report
	m     *cellMeta     // observer figures of the call
}

// base is the Result skeleton every path fills in.
func (c cellState) base() *Result {
	return &Result{
		Status:          StatusSuccess,
		DurationSeconds: seconds(time.Since(c.start)),
		ToolCallsMade:   c.calls,
		Kernel: KernelResult{
			ID: c.lv.id, Mode: c.rq.key.mode, Reused: c.use.reused,
			ExecutionCount: c.count, StateReset: c.use.stateReset, Isolation: c.lv.isolationReport(),
		},
	}
}

// settled assembles the Result of a cell the runner answered.
func (p *Pool) settled(c cellState) *Result {
	r := c.reply
	res := c.base()
	out := p.finish(c, res)
	res.Kernel.StatePreserved = true
	res.Exception = cleanException(c.lv.filter, r.Exception)
	stdout, stderr := out.Stdout, out.Stderr
	switch r.Status {
	case kernel.ReplyError:
		trace := c.lv.filter.CapText(r.Traceback)
		res.Status, res.ExitCode = StatusError, 1
		res.Error = cmpOr(trace, msgException)
		stderr += trace
		res.Output = stdout
		if stderr != "" {
			res.Output = stdout + StderrSeparator + stderr
		}
	case kernel.ReplyExit:
		res.Kernel.Ended, res.Kernel.StatePreserved = true, false
		res.ExitCode = r.ExitCode
		res.Output = withStderr(stdout, stderr)
	default: // kernel.ReplyOK
		res.Output = withStderr(stdout, stderr)
	}
	if r.Interrupted != nil && r.Status != kernel.ReplyExit {
		marker := p.interruptedKept(c, res, r.Interrupted)
		if stdout != "" {
			marker = strings.TrimRight(stdout, "\n") + "\n\n" + marker
		}
		res.Output = withStderr(marker, stderr)
	}
	return res
}

// interruptedKept reports a cell that was interrupted and ended within its
// grace (the kernel and its variables live on) and returns the marker that
// ends its stdout.
func (p *Pool) interruptedKept(c cellState, res *Result, cause error) string {
	res.ExitCode = -1
	if errors.Is(cause, kernel.ErrTimeout) {
		p.count(func(st *PoolStats) { st.Timeouts++ })
		res.Status = StatusTimeout
		res.Error = fmt.Sprintf("Cell timed out after %s and was interrupted (KeyboardInterrupt). %s", formatTimeout(c.rq.timeout), msgStateKept)
		return timeoutMarker + res.Error
	}
	p.count(func(st *PoolStats) { st.Interrupted++ })
	why := "by request"
	if errors.Is(cause, kernel.ErrCanceled) {
		why = "because the caller went away"
	}
	res.Status = StatusInterrupted
	res.Error = "Cell interrupted " + why + " (KeyboardInterrupt). " + msgStateKept
	return "[execution interrupted — " + why + "; variables kept]"
}

// failed words the Result of a cell whose Exec failed; reason is the fate
// cell.decide chose for the kernel ("" when it lives on: a busy kernel,
// which the semaphore rules out). It writes; it decides nothing.
func (p *Pool) failed(ctx context.Context, c cellState, err error, reason teardownReason) *Result {
	res := c.base()
	res.ExitCode = -1
	stdout := ""
	if c.reply != nil {
		stdout = p.finish(c, res).Stdout
	}
	switch reason {
	case reasonCanceled:
		why := "canceled by the caller"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			why = "the caller's deadline passed"
		}
		interrupt(res, stdout, why)
	case reasonInterrupted:
		res.Status, res.Error = StatusInterrupted, "Cell interrupted by request, but it did not stop within the interrupt grace; the session kernel was killed and "+msgStateLostTail+" Variables did not survive."
		res.Output = "[execution interrupted — the kernel was killed]"
		if stdout != "" {
			res.Output = stdout + "\n" + res.Output
		}
	case reasonTimeout:
		res.Status = StatusTimeout
		res.Error = fmt.Sprintf("Cell timed out after %s; the session kernel was killed and %s", formatTimeout(c.rq.timeout), msgStateLostTail)
		if pol := p.policy(c.rq.key.mode); pol.TimeoutAction != TimeoutKill {
			res.Error = fmt.Sprintf("Cell timed out after %s and did not stop within the %s interrupt grace; the session kernel was killed and %s",
				formatTimeout(c.rq.timeout), formatTimeout(cmp.Or(pol.InterruptGrace, kernel.DefaultInterruptGrace)), msgStateLostTail)
		}
		res.Output = timeoutMarker + res.Error
		if stdout != "" {
			res.Output = stdout + "\n\n" + timeoutMarker + res.Error
		}
	case reasonOOM, reasonDied:
		p.writeDeath(c, res, stdout, err)
	case reasonProtocol:
		res.Status, res.Output = StatusError, stdout
		res.Error = "The session kernel broke the wire protocol (" + c.lv.filter.CapText(err.Error()) + "); it was killed and " + msgStateLostTail
	case reasonDead, "":
		res.Status, res.Output = StatusError, stdout
		cause := err
		if kerr := c.lv.k.Err(); kerr != nil && errors.Is(err, kernel.ErrClosed) {
			cause = kerr
		}
		res.Error = "The session kernel failed before running the cell (" + c.lv.filter.CapText(cause.Error()) + "); " + msgStateLostTail
	default: // a pool operation doomed the kernel (kill, shutdown, Close)
		interrupt(res, stdout, string(reason))
	}
	return res
}

// writeDeath words a kernel that died mid-cell: the OOM killer's verdict,
// or its stderr tail.
func (p *Pool) writeDeath(c cellState, res *Result, stdout string, err error) {
	res.Status, res.Output = StatusError, stdout
	var death *kernel.DeathError
	errors.As(err, &death)
	verdict := c.lv.k.Verdict()
	if death.OOMKilled || verdict.OOMKilled {
		res.Kernel.OOMKilled = true
		res.Error = oomMessage(max(death.MemoryLimit, verdict.MemoryLimit))
		return
	}
	res.Error = "The session kernel died while running the cell."
	if tail := strings.TrimSpace(c.lv.filter.CapText(death.Stderr)); tail != "" {
		res.Error = "The session kernel died while running the cell: " + tail
	}
}

// finish runs the cell's output through the kernel's filter (clean, cap,
// spill into <StateDir>/spill/<id>) and copies the truncation metadata into res.
// A filter error loses nothing: the texts are still cleaned and returned.
func (p *Pool) finish(c cellState, res *Result) CellOutput {
	r := c.reply
	// A streamed cell's events were cleaned (and the stream's hold checks
	// cleaned them again) as they went; the result cleans the same output
	// whole, and its masks are the ones counted, once per secret.
	dropRedactions(c.lv.filter)
	out, err := finishStreams(c.lv.filter, r, p.spillDir(c.lv.id), c.count)
	if err != nil {
		p.log.Warn("output filter failed", "id", c.lv.id, "error", err)
		out = CellOutput{
			Stdout: c.lv.filter.Clean(r.Stdout), Stderr: c.lv.filter.Clean(r.Stderr),
			StdoutBytesTotal: len(r.Stdout), StderrBytesTotal: len(r.Stderr),
			Warning: "The output filter failed (" + err.Error() + "); output is cleaned but not capped.",
		}
	}
	res.StdoutTruncated, res.StdoutBytesTotal = out.StdoutTruncated, out.StdoutBytesTotal
	res.StderrTruncated, res.StderrBytesTotal = out.StderrTruncated, out.StderrBytesTotal
	res.StdoutSpillPath, res.Warning = out.SpillPath, out.Warning
	res.Stdout, res.Stderr = out.Stdout, out.Stderr
	if out.SpillPath != "" {
		res.StdoutSpillName = filepath.Base(out.SpillPath)
		res.Warning += fmt.Sprintf(" The daemon also serves it: kernpool spill %s %s (GET /v1/kernels/%s/spill/%s).",
			c.lv.id, res.StdoutSpillName, c.lv.id, res.StdoutSpillName)
	}
	if c.m != nil {
		c.m.dropped += droppedBytes(out.StdoutTruncated, out.StdoutBytesTotal, out.Stdout) +
			droppedBytes(out.StderrTruncated, out.StderrBytesTotal, out.Stderr)
	}
	for _, d := range r.Displays {
		res.Displays = append(res.Displays, cleanDisplay(c.lv.filter, d))
	}
	if r.DisplaysDropped > 0 {
		res.Warning = strings.TrimSpace(res.Warning + fmt.Sprintf(" %d display(s) dropped: over the %s cap per display or per cell.",
			r.DisplaysDropped, units.FormatBytes(kernel.DisplayCellBytes)))
	}
	if r.StdoutClipped {
		res.StdoutTruncated = true
		res.StdoutBytesTotal = max(res.StdoutBytesTotal, r.StdoutBytesTotal)
	}
	return out
}

// droppedBytes is what a cap left out of an inline text (the truncation
// notice it carries makes this a slight undercount).
func droppedBytes(truncated bool, total int, inline string) int64 {
	if !truncated || total <= len(inline) {
		return 0
	}
	return int64(total - len(inline))
}

// interrupt fills res as an interrupted cell, the marker naming why.
func interrupt(res *Result, stdout, why string) {
	res.Status, res.ExitCode, res.Error = StatusInterrupted, -1, msgInterrupted
	marker := interruptedMarker
	if why != "" {
		marker = "[execution interrupted — " + why + "]"
	}
	res.Output = marker
	if stdout != "" {
		res.Output = stdout + "\n" + marker
	}
}

// interruptedResult is the Result of a cell that never reached a kernel
// because it was killed or abandoned during the spawn.
func interruptedResult(rq normalized, start time.Time, why string, lv *live, use kernelUse) *Result {
	res := &Result{
		DurationSeconds: seconds(time.Since(start)),
		Kernel:          KernelResult{Mode: rq.key.mode, Reused: use.reused, StateReset: use.stateReset},
	}
	if lv != nil {
		res.Kernel.ID, res.Kernel.Isolation = lv.id, lv.isolationReport()
	}
	interrupt(res, "", why)
	return res
}

// waitAbandoned is the Result of a caller whose ctx ended while it waited
// for its kernel's previous cell: nothing ran and nothing was killed.
func waitAbandoned(rq normalized, start time.Time) *Result {
	return &Result{
		Status: StatusInterrupted, ExitCode: -1, Error: msgWaitAbandoned,
		Output:          interruptedMarker,
		DurationSeconds: seconds(time.Since(start)),
		Kernel:          KernelResult{Mode: rq.key.mode, StatePreserved: true},
	}
}

func oomMessage(limit int64) string {
	if limit <= 0 {
		return "The session kernel was killed by the out-of-memory killer; " + msgStateLostTail
	}
	return "The session kernel was killed by the out-of-memory killer at its memory limit of " +
		units.FormatBytes(limit) + "; " + msgStateLostTail
}

func withStderr(stdout, stderr string) string {
	if stderr == "" {
		return stdout
	}
	return stdout + StderrSeparator + stderr
}

// formatTimeout writes whole seconds as the reference does ("30s") and
// anything finer in Go's notation ("1.5s", "250ms").
func formatTimeout(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", int64(d/time.Second))
	}
	return d.String()
}

// seconds rounds a duration to milliseconds, in seconds.
func seconds(d time.Duration) float64 {
	return math.Round(d.Seconds()*1000) / 1000
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
