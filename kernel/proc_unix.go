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

// Release waits (bounded) until no process of the group remains, so that
// Kill really returns when everything is gone: killpg only sends SIGKILL,
// and members that were not the runner's direct children die (and are
// reaped by init) asynchronously. A process group cannot be waited for, so
// this polls with backoff; it runs on teardown only, never per cell.
func (g *groupSandbox) Release() (Verdict, error) {
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

func (g *groupSandbox) Stats() (Stats, error) { return Stats{}, nil }

func (g *groupSandbox) UID() int { return -1 }

// exitStatus reads the exit code or the terminating signal's name.
func exitStatus(ps *os.ProcessState) (code int, signal string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, unix.SignalName(ws.Signal())
	}
	return ps.ExitCode(), ""
}
