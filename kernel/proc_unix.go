//go:build unix

package kernel

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// groupGoneTimeout bounds how long Release waits for a killed group's
// members to be gone (reaped by init once they are zombies).
const groupGoneTimeout = 2 * time.Second

// ProcessGroup is the one process-group sandbox: the kernel leads a
// process group of its own, killed with killpg, and Release returns only
// once no member of the group runs any more. It is what Start uses when
// Spec.Sandbox is nil and what package isolate builds on (without a cgroup
// it is the whole confinement: --isolation=process). It does not catch a
// process that left the group (setsid); only a cgroup does.
type ProcessGroup struct {
	mu       sync.Mutex
	pid      int
	released bool
}

// NewProcessGroup returns the process-group sandbox of one kernel.
func NewProcessGroup() *ProcessGroup { return &ProcessGroup{} }

// Prepare puts the child in a process group of its own.
func (g *ProcessGroup) Prepare(cmd *exec.Cmd, _ string) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pgid = true, 0
	return nil
}

// Started records the group leader's pid.
func (g *ProcessGroup) Started(pid int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pid = pid
	return nil
}

// Kill kills the process group. Idempotent; a no-op after Release, when the
// group id may name someone else's group.
func (g *ProcessGroup) Kill() error {
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

// Release kills the group and waits (bounded) until no member of it runs,
// so that a teardown really ends when everything is gone: killpg only
// sends SIGKILL, and members that were not the runner's direct children
// die (and are reaped by init) asynchronously. Zombies count as gone
// (groupLive reads each member's state). A process group cannot be waited
// for, so this polls with backoff; it runs on teardown only, never per
// cell. Idempotent.
func (g *ProcessGroup) Release() (Verdict, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return Verdict{}, nil
	}
	g.released = true
	if g.pid <= 0 {
		return Verdict{}, nil
	}
	pause := 50 * time.Microsecond
	for end := time.Now().Add(groupGoneTimeout); ; {
		_ = syscall.Kill(-g.pid, syscall.SIGKILL) // members forked since the last kill
		live, err := groupLive(g.pid)
		if err != nil {
			return Verdict{}, fmt.Errorf("probe process group %d: %w", g.pid, err)
		}
		if !live {
			return Verdict{}, nil
		}
		if time.Now().After(end) {
			return Verdict{}, fmt.Errorf("process group %d: %w", g.pid, errGroupSurvives)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// Stats are unknown without a cgroup.
func (g *ProcessGroup) Stats() (Stats, error) { return Stats{}, nil }

// UID is -1: the kernel keeps the daemon's uid.
func (g *ProcessGroup) UID() int { return -1 }

// Isolation reports a process group of the daemon's uid, without limits,
// namespaces or seccomp.
func (g *ProcessGroup) Isolation() Isolation {
	return Isolation{Mode: IsolationProcess, UID: os.Getuid(), Namespaces: []string{}, Network: true}
}

// exitStatus reads the exit code or the terminating signal's name.
func exitStatus(ps *os.ProcessState) (code int, signal string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, unix.SignalName(ws.Signal())
	}
	return ps.ExitCode(), ""
}
