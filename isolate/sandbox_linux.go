package isolate

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/units"
)

// releaseTimeout bounds how long Release waits for a group to empty.
const releaseTimeout = 5 * time.Second

// Sandbox confines one kernel; it implements kernel.Sandbox.
type Sandbox struct {
	iso     *Isolator
	id      string
	profile Profile
	uid     int // -1: the daemon's own
	gid     int
	group   *cgroup.Group // nil: process-group fallback
	log     hclog.Logger
	// pg is the kernel's process group: kill and, without a cgroup, the
	// wait until it is gone (the one process-group sandbox).
	pg *kernel.ProcessGroup
	// isolation is what is enforced, limits read back from the group.
	isolation kernel.Isolation

	mu   sync.Mutex
	init *initStep // nil without the init step
	cgfd *os.File
	pid  int
	// stagingMount is the staging dir's own tmpfs ("" when none).
	stagingMount string
	released     bool
	verdict      kernel.Verdict
	relErr       error
}

var _ kernel.Sandbox = (*Sandbox)(nil)

// Prepare sets the child's process attributes (own process group,
// Pdeathsig, the v2 cgroup fd, namespaces) and gives the staging tree and
// the group files the kernel writes to its uid. Under the init step it
// wraps cmd in the kernel init (package kinit), which applies the rest
// before it forks the interpreter; otherwise the credentials go on cmd and
// the runner's KERNPOOL_* variables carry rlimits, no_new_privs and v1
// placement.
func (s *Sandbox) Prepare(cmd *exec.Cmd, staging string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return fmt.Errorf("prepare %s: %w", s.id, ErrReleased)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	_ = s.pg.Prepare(cmd, staging)
	a := cmd.SysProcAttr
	a.Pdeathsig = syscall.SIGKILL
	if s.uid >= 0 {
		if err := chownTree(staging, s.uid, s.gid); err != nil {
			return fmt.Errorf("prepare %s: chown staging: %w", s.id, err)
		}
	}
	var env, placement []string
	if s.group != nil {
		var err error
		if placement, err = s.prepareGroup(a, &env); err != nil {
			return fmt.Errorf("prepare %s: %w", s.id, err)
		}
	}
	if s.iso.useInit {
		cmd.Env = append(cmd.Env, env...)
		if err := s.wrapInit(cmd, staging, placement); err != nil {
			return fmt.Errorf("prepare %s: %w", s.id, err)
		}
		return nil
	}
	s.prepareDirect(a, &env, placement)
	cmd.Env = append(cmd.Env, env...)
	return nil
}

// prepareDirect confines a kernel started without the init step.
func (s *Sandbox) prepareDirect(a *syscall.SysProcAttr, env *[]string, placement []string) {
	if s.uid >= 0 {
		a.Credential = &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.gid), Groups: []uint32{}}
	}
	if s.profile.NoNetwork {
		a.Cloneflags |= syscall.CLONE_NEWNET
	}
	if s.profile.PIDNamespace {
		a.Cloneflags |= syscall.CLONE_NEWPID
	}
	if len(placement) > 0 {
		*env = append(*env, kernel.EnvCgroupProcs+"="+strings.Join(placement, string(os.PathListSeparator)))
	}
	if rl := rlimitEnv(s.iso.cfg.Rlimits); rl != "" {
		*env = append(*env, kernel.EnvRlimits+"="+rl)
	}
	if s.iso.cfg.NoNewPrivs {
		*env = append(*env, kernel.EnvNoNewPrivs+"=1")
	}
}

// prepareGroup chowns the group, sets the v2 cgroup fd and the runner's
// kill file; it returns the v1 cgroup.procs files to place the kernel in.
func (s *Sandbox) prepareGroup(a *syscall.SysProcAttr, env *[]string) ([]string, error) {
	if s.uid >= 0 {
		if err := s.group.Chown(s.uid, s.gid); err != nil {
			return nil, err
		}
	}
	// v2, and a hybrid host's cgroup2 mount: clone straight into the group.
	f, err := s.group.OpenFD()
	switch {
	case err == nil:
		if s.cgfd != nil {
			_ = s.cgfd.Close()
		}
		s.cgfd = f
		a.UseCgroupFD, a.CgroupFD = true, int(f.Fd())
	case !errors.Is(err, cgroup.ErrUnsupported):
		return nil, err
	}
	if kf := s.group.KillFile(); kf != "" {
		*env = append(*env, kernel.EnvCgroupKill+"="+kf)
	}
	return s.group.PlacementFiles(), nil
}

// Started records the kernel's pid and closes the cgroup fd. Under the
// init step it waits for the init's report: an init that could not apply
// a namespace, a mount or the seccomp filter fails the start (fail closed).
func (s *Sandbox) Started(pid int) error {
	s.mu.Lock()
	s.pid = pid
	_ = s.pg.Started(pid)
	var err error
	if s.cgfd != nil {
		err = s.cgfd.Close()
		s.cgfd = nil
	}
	st := s.init
	s.mu.Unlock()
	if err == nil && st != nil {
		// Unlocked: Kill must stay possible while the init sets up.
		err = st.awaitInit()
	}
	if err != nil {
		return fmt.Errorf("started %s: %w", s.id, err)
	}
	return nil
}

// Kill SIGKILLs every process of the kernel: the whole cgroup, plus the
// process group (which also covers the instant before a v1 kernel placed
// itself), plus, without a cgroup but with a uid of its own, every process
// of that uid. Idempotent and safe to call concurrently.
func (s *Sandbox) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killLocked()
}

func (s *Sandbox) killLocked() error {
	var err error
	if s.group != nil {
		err = s.group.Kill()
	}
	// A no-op after Release: an empty process group's number may be
	// reused. Between the leader's reap and Release it cannot be.
	_ = s.pg.Kill()
	if s.group == nil && s.uid >= 0 && !s.iso.cfg.PerOwnerUID {
		killUID(s.uid)
	}
	if err != nil {
		return fmt.Errorf("kill %s: %w", s.id, err)
	}
	return nil
}

// Release runs once after the kernel's main process was reaped: it kills
// what is left and waits until the cgroup is empty, reads the OOM verdict,
// removes the group, and frees the uid (only once nothing of it runs).
// Later calls return the first call's result.
func (s *Sandbox) Release() (kernel.Verdict, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return s.verdict, s.relErr
	}
	if s.group == nil {
		_ = s.killLocked() // before released: includes the process group
	}
	s.released = true
	if s.cgfd != nil {
		_ = s.cgfd.Close()
		s.cgfd = nil
	}
	clean := true
	if s.group != nil {
		s.verdict, clean, s.relErr = s.releaseGroup()
		_, _ = s.pg.Release() // the group is empty: marks the pgid as not ours any more
	} else {
		// Wait until no member of the process group runs (zombies count as gone).
		if _, err := s.pg.Release(); err != nil {
			clean, s.relErr = false, fmt.Errorf("release %s: %w", s.id, err)
		}
		if s.uid >= 0 && !s.iso.cfg.PerOwnerUID && len(procUIDs()[s.uid]) > 0 {
			clean = false
		}
	}
	if s.init != nil && s.init.status != nil {
		s.verdict.Reported, s.verdict.ExitCode, s.verdict.Signal = s.init.exitStatus()
		s.closeInit()
	}
	s.unmountStaging()
	if s.uid >= 0 {
		if clean {
			s.iso.uids.release(s.uid)
		} else {
			s.iso.uids.taint(s.uid)
			s.log.Error("kernel processes outlived their kernel; its uid is retired", "uid", s.uid)
		}
	}
	return s.verdict, s.relErr
}

func (s *Sandbox) releaseGroup() (kernel.Verdict, bool, error) {
	v := kernel.Verdict{MemoryLimit: s.group.MemoryLimit()}
	var errs []error
	if err := s.group.Kill(); err != nil {
		errs = append(errs, err)
	}
	if err := s.group.WaitEmpty(releaseTimeout); err != nil {
		return v, false, fmt.Errorf("release %s: %w", s.id, err)
	}
	oom, err := s.group.OOMKilled()
	if err != nil {
		errs = append(errs, err)
	}
	if oom {
		v.OOMKilled = true
		s.iso.oomKills.Add(1)
		s.log.Warn("kernel killed at its memory limit", "limit", units.FormatBytes(v.MemoryLimit))
	}
	if err := s.group.Remove(releaseTimeout); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return v, true, fmt.Errorf("release %s: %w", s.id, err)
	}
	return v, true, nil
}

// Procs lists the kernel's processes from its cgroup (none without one):
// an interrupt ends all of them but the runner's own (kernel.ProcLister).
func (s *Sandbox) Procs() ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.group == nil || s.released {
		return nil, nil
	}
	p, err := s.group.Procs()
	if err != nil {
		return nil, fmt.Errorf("procs %s: %w", s.id, err)
	}
	return p, nil
}

// Stats reads live figures from the kernel's cgroup (zeros without one).
func (s *Sandbox) Stats() (kernel.Stats, error) {
	if s.group == nil {
		return kernel.Stats{}, nil
	}
	st, err := s.group.Stats()
	if err != nil {
		return kernel.Stats{}, fmt.Errorf("stats %s: %w", s.id, err)
	}
	return kernel.Stats{MemoryCurrent: st.MemoryCurrent, MemoryPeak: st.MemoryPeak, Pids: st.Pids, CPUTime: st.CPUTime}, nil
}

// UID is the uid the kernel runs as (-1: the daemon's own).
func (s *Sandbox) UID() int { return s.uid }

// Isolation reports what is enforced for the kernel: fixed at NewSandbox,
// and once the kernel's init reported, its namespaces and seccomp as the
// init saw them in force.
func (s *Sandbox) Isolation() kernel.Isolation {
	is := s.isolation
	is.Namespaces = append([]string{}, is.Namespaces...)
	if ns := s.Namespaces(); ns != nil {
		sort.Strings(ns)
		is.Namespaces, is.Seccomp, is.MemoryMerge = ns, s.Seccomp(), s.MemoryMerge()
		is.Supervisor = s.Supervisor()
	}
	return is
}

// fillIsolation records what the kernel gets, the limits as its cgroup
// really has them. In sandbox mode a limit that was asked for and is not
// in force refuses the kernel.
func (s *Sandbox) fillIsolation(want Limits) error {
	cfg := &s.iso.cfg
	s.isolation = kernel.Isolation{
		Mode: cfg.isolationMode(), UID: s.uid, Namespaces: s.iso.facts.namespacesFor(s.profile),
		Seccomp: s.iso.facts.Seccomp, Network: s.iso.facts.hostNetwork(s.profile),
	}
	if s.uid < 0 {
		s.isolation.UID = os.Geteuid()
	}
	if s.group != nil {
		got, err := s.group.Limits()
		if err != nil {
			return err
		}
		s.isolation.MemoryMax, s.isolation.PidsMax, s.isolation.CPUMax = got.MemoryMax, got.PidsMax, got.CPUMax
	}
	if cfg.isolationMode() == kernel.IsolationProcess {
		return nil
	}
	var missing []string
	for _, c := range []struct {
		name      string
		want, got bool
	}{
		{"memory_max", want.MemoryMax > 0, s.isolation.MemoryMax > 0},
		{"pids_max", want.PidsMax > 0, s.isolation.PidsMax > 0},
		{"cpu_max", want.CPUMax > 0, s.isolation.CPUMax > 0},
	} {
		if c.want && !c.got {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: the kernel's cgroup does not enforce %s", ErrIsolation, strings.Join(missing, ", "))
	}
	return nil
}

// ID is the kernel id the sandbox was made for.
func (s *Sandbox) ID() string { return s.id }
