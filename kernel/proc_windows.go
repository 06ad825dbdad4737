package kernel

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

const (
	createNewProcessGroup = 0x00000200
	createNoWindow        = 0x08000000
)

// ProcessGroup is the sandbox of a kernel started without one on Windows: a
// new process group without a console; Kill terminates the runner only
// (package isolate adds a Job Object for the whole tree).
type ProcessGroup struct {
	mu       sync.Mutex
	proc     *os.Process
	released bool
}

// NewProcessGroup returns the process-group sandbox of one kernel.
func NewProcessGroup() *ProcessGroup { return &ProcessGroup{} }

func (g *ProcessGroup) Prepare(cmd *exec.Cmd, _ string) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: createNewProcessGroup | createNoWindow}
	return nil
}

func (g *ProcessGroup) Started(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return fmt.Errorf("find process %d: %w", pid, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.proc = p
	return nil
}

// Kill terminates the runner. Idempotent; a no-op after Release.
func (g *ProcessGroup) Kill() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.proc == nil || g.released {
		return nil
	}
	if err := g.proc.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %d: %w", g.proc.Pid, err)
	}
	return nil
}

func (g *ProcessGroup) Release() (Verdict, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.released = true
	if g.proc != nil {
		_ = g.proc.Release()
	}
	return Verdict{}, nil
}

func (g *ProcessGroup) Stats() (Stats, error) { return Stats{}, nil }

func (g *ProcessGroup) UID() int { return -1 }

// Isolation reports a process group of the daemon's user (Windows has no uids).
func (g *ProcessGroup) Isolation() Isolation {
	return Isolation{Mode: IsolationProcess, UID: -1, Namespaces: []string{}, Network: true}
}

// hardenProcAttr ensures the runner gets its own process group and no console.
func hardenProcAttr(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= createNewProcessGroup | createNoWindow
}

// exitStatus reads the exit code; Windows has no terminating signals.
func exitStatus(ps *os.ProcessState) (code int, signal string) {
	return ps.ExitCode(), ""
}
