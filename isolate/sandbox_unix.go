//go:build unix && !linux

package isolate

import (
	"fmt"
	"os/exec"
	"sync"
	"syscall"

	"github.com/kernpool/kernpool/kernel"
)

func platformReport(cfg Config) Report {
	r := baseReport(cfg)
	r.Lost = append(cgroupLosses(false, false), "a uid of their own", "no_new_privs")
	r.Advice = []string{"run kernpool on Linux for cgroups, kernel uids and namespaces"}
	return r
}

// Sandbox confines one kernel by process group; it implements kernel.Sandbox.
type Sandbox struct {
	iso      *Isolator
	id       string
	mu       sync.Mutex
	pid      int
	released bool
}

var _ kernel.Sandbox = (*Sandbox)(nil)

// newSandbox ignores the limits: nothing enforces them without cgroups.
func newSandbox(i *Isolator, id string, _ Limits) (*Sandbox, error) {
	return &Sandbox{iso: i, id: id}, nil
}

// Prepare puts the kernel in its own process group and appends the rlimits.
func (s *Sandbox) Prepare(cmd *exec.Cmd, staging string) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if rl := rlimitEnv(s.iso.cfg.Rlimits); rl != "" {
		cmd.Env = append(cmd.Env, kernel.EnvRlimits+"="+rl)
	}
	return nil
}

// Started records the kernel's pid.
func (s *Sandbox) Started(pid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pid = pid
	return nil
}

// Kill SIGKILLs the kernel's process group. Idempotent; a no-op after Release.
func (s *Sandbox) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pid > 0 && !s.released {
		if err := syscall.Kill(-s.pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("isolate: kill %s: %w", s.id, err)
		}
	}
	return nil
}

// Release kills what is left of the process group. Idempotent.
func (s *Sandbox) Release() (kernel.Verdict, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pid > 0 && !s.released {
		_ = syscall.Kill(-s.pid, syscall.SIGKILL)
	}
	s.released = true
	return kernel.Verdict{}, nil
}

// Stats are unknown without cgroups.
func (s *Sandbox) Stats() (kernel.Stats, error) { return kernel.Stats{}, nil }

// UID is -1: kernels keep the daemon's uid here.
func (s *Sandbox) UID() int { return -1 }

// ID is the kernel id the sandbox was made for.
func (s *Sandbox) ID() string { return s.id }
