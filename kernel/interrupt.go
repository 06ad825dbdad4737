package kernel

import (
	"cmp"
	"fmt"
	"time"
)

// DefaultInterruptGrace is how long an interrupted cell may take to end
// before its kernel is killed.
const DefaultInterruptGrace = 2 * time.Second

// ProcLister is implemented by sandboxes that can list every process of
// their kernel (its cgroup): an interrupt ends all of them but the runner.
type ProcLister interface {
	Procs() ([]int, error)
}

// Interrupt stops the running cell: SIGINT to the runner (KeyboardInterrupt
// in the cell) and SIGKILL to every other process of the kernel but the
// runner's own; a cell that has not ended after its grace is killed with
// the kernel (Exec then fails with ErrInterrupted). ErrIdle when no cell
// runs; ErrClosed after the kernel ended.
func (k *Kernel) Interrupt() error {
	select {
	case <-k.done:
		return fmt.Errorf("kernel interrupt: %w", ErrClosed)
	default:
	}
	if !k.cell.requestInterrupt() {
		return fmt.Errorf("kernel interrupt: %w", ErrIdle)
	}
	return nil
}

// interruptResend is how often SIGINT is repeated until the interrupted
// cell ends or its grace runs out. CPython runs a Python-level signal
// handler only between bytecodes: a SIGINT that lands after the last
// check before a blocking call (time.sleep, a read) is handled only when
// that call returns, so one SIGINT could leave the cell asleep until the
// grace kills the kernel. A repeat interrupts the call (EINTR), and the
// handler then raises KeyboardInterrupt.
const interruptResend = 100 * time.Millisecond

func graceTimer(grace time.Duration) <-chan time.Time {
	grace = cmp.Or(max(grace, 0), DefaultInterruptGrace)
	return time.After(grace)
}

// interrupt signals the cell: SIGINT to the runner, SIGKILL to the rest.
// False where the platform cannot interrupt (the kernel is then killed).
func (k *Kernel) interrupt() bool {
	if err := signalInterrupt(k.cmd.Process.Pid); err != nil {
		k.log.Warn("cannot interrupt the kernel; killing it", "id", k.id, "error", err)
		return false
	}
	var procs []int
	if l, ok := k.sb.(ProcLister); ok {
		procs, _ = l.Procs() // the process group scan below still runs
	}
	if n := endOthers(k.cmd.Process.Pid, procs, k.cell.helperPids()); n > 0 {
		k.log.Debug("interrupt ended the cell's processes", "id", k.id, "count", n)
	}
	return true
}
