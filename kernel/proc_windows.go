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

// groupSandbox is the sandbox of a kernel started without one on Windows: a
// new process group without a console; Kill terminates the runner only
// (package isolate adds a Job Object for the whole tree).
type groupSandbox struct {
	mu       sync.Mutex
	proc     *os.Process
	released bool
}

func newGroupSandbox() Sandbox { return &groupSandbox{} }

func (g *groupSandbox) Prepare(cmd *exec.Cmd, _ string) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: createNewProcessGroup | createNoWindow}
	return nil
}

func (g *groupSandbox) Started(pid int) error {
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
func (g *groupSandbox) Kill() error {
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

func (g *groupSandbox) Release() (Verdict, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.released = true
	if g.proc != nil {
		_ = g.proc.Release()
	}
	return Verdict{}, nil
}

func (g *groupSandbox) Stats() (Stats, error) { return Stats{}, nil }

func (g *groupSandbox) UID() int { return -1 }

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
