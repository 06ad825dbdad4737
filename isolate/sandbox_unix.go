//go:build unix && !linux

package isolate

import (
	"os"
	"os/exec"

	"github.com/kernpool/kernpool/kernel"
)

func platformReport(cfg Config) Report {
	r := baseReport(cfg)
	r.Lost = append(cgroupLosses(false, false), "a uid of their own", "no_new_privs")
	r.Advice = []string{"run kernpool on Linux for cgroups, kernel uids and namespaces"}
	return r
}

// Sandbox confines one kernel by process group (kernel.ProcessGroup: kill
// the group, wait until it is gone); it implements kernel.Sandbox.
type Sandbox struct {
	*kernel.ProcessGroup
	iso *Isolator
	id  string
}

var _ kernel.Sandbox = (*Sandbox)(nil)

// newSandbox ignores the limits: nothing enforces them without cgroups.
func newSandbox(i *Isolator, id string, _ Limits) (*Sandbox, error) {
	return &Sandbox{ProcessGroup: kernel.NewProcessGroup(), iso: i, id: id}, nil
}

// Prepare puts the kernel in its own process group and appends the rlimits.
func (s *Sandbox) Prepare(cmd *exec.Cmd, staging string) error {
	_ = s.ProcessGroup.Prepare(cmd, staging)
	if rl := rlimitEnv(s.iso.cfg.Rlimits); rl != "" {
		cmd.Env = append(cmd.Env, kernel.EnvRlimits+"="+rl)
	}
	return nil
}

// Isolation reports a process group of the daemon's uid.
func (s *Sandbox) Isolation() kernel.Isolation {
	return kernel.Isolation{Mode: s.iso.cfg.isolationMode(), UID: os.Geteuid(), Namespaces: []string{}, Network: true}
}

// ID is the kernel id the sandbox was made for.
func (s *Sandbox) ID() string { return s.id }

// Namespaces is nil: kernels get no namespaces of their own here.
func (s *Sandbox) Namespaces() []string { return nil }

// Seccomp is false: there is no seccomp filter here.
func (s *Sandbox) Seccomp() bool { return false }
