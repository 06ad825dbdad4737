//go:build unix

package kernel

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// groupSandbox is the sandbox of a kernel started without one: its own
// process group, killed with killpg. It does not catch a process that left
// the group (setsid); only a cgroup does (package isolate).
type groupSandbox struct {
	mu       sync.Mutex
	pid      int
	released bool
}

func newGroupSandbox() Sandbox { return &groupSandbox{} }

func (g *groupSandbox) Prepare(cmd *exec.Cmd, _ string) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return nil
}

func (g *groupSandbox) Started(pid int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pid = pid
	return nil
}

// Kill kills the process group. Idempotent; a no-op after Release, when the
// group id may name someone else's group.
func (g *groupSandbox) Kill() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pid <= 0 || g.released {
		return nil
	}
	if err := syscall.Kill(-g.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killpg %d: %w", g.pid, err)
	}
	return nil
}

func (g *groupSandbox) Release() (Verdict, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.released = true
	return Verdict{}, nil
}

func (g *groupSandbox) Stats() (Stats, error) { return Stats{}, nil }

func (g *groupSandbox) UID() int { return -1 }

// exitStatus reads the exit code or the terminating signal's name.
func exitStatus(ps *os.ProcessState) (code int, signal string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, unix.SignalName(ws.Signal())
	}
	return ps.ExitCode(), ""
}
