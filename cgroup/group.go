package cgroup

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Group is the cgroup of one kernel. Its methods are safe for concurrent use.
type Group struct {
	name    string
	b       groupBackend
	log     hclog.Logger
	mu      sync.Mutex
	removed bool
}

// Name is the group's name (the kernel id).
func (g *Group) Name() string { return g.name }

// PlacementFiles are the cgroup.procs files the kernel writes "0" into
// itself before any user code runs (v1 and hybrid); nil on v2, where the
// kernel is cloned straight into its group.
func (g *Group) PlacementFiles() []string { return g.b.placementFiles() }

// KillFile is the group's cgroup.kill file (v2), "" where there is none.
func (g *Group) KillFile() string { return g.b.killFile() }

// OpenFD opens the group directory for SysProcAttr.CgroupFD (v2 only; the
// caller closes it once the child started). ErrUnsupported on v1.
func (g *Group) OpenFD() (*os.File, error) {
	f, err := g.b.openFD()
	if err != nil {
		return nil, fmt.Errorf("open group %s: %w", g.name, err)
	}
	return f, nil
}

// Chown gives uid/gid the files the kernel writes itself (the placement
// files and the kill file), nothing else.
func (g *Group) Chown(uid, gid int) error {
	if err := g.b.chown(uid, gid); err != nil {
		return fmt.Errorf("chown group %s: %w", g.name, err)
	}
	return nil
}

// Kill SIGKILLs every process in the group (cgroup.kill on v2; freeze, kill,
// thaw on v1). It does not wait; see WaitEmpty. Idempotent; a removed group
// is a no-op.
func (g *Group) Kill() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removed {
		return nil
	}
	if _, err := g.b.kill(); err != nil {
		return fmt.Errorf("kill group %s: %w", g.name, err)
	}
	return nil
}

// Procs lists the pids in the group.
func (g *Group) Procs() ([]int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removed {
		return nil, nil
	}
	p, err := g.b.procs()
	if err != nil {
		return nil, fmt.Errorf("procs of group %s: %w", g.name, err)
	}
	return p, nil
}

// WaitEmpty kills and polls until no process is left in the group, or
// fails with ErrNotEmpty after timeout. Processes forked during a kill are
// caught by the next pass.
func (g *Group) WaitEmpty(timeout time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removed {
		return nil
	}
	return waitEmpty(g.b, timeout)
}

func waitEmpty(b groupBackend, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	delay := 100 * time.Microsecond
	for pass := 0; ; pass++ {
		pids, err := b.procs()
		if err != nil {
			return fmt.Errorf("wait empty: %w", err)
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait empty: %w: %d left after %s", ErrNotEmpty, len(pids), timeout)
		}
		// Dying processes leave in microseconds; re-kill only when some
		// linger, which catches children forked before the freeze.
		if pass > 0 && pass%8 == 0 {
			if _, err := b.kill(); err != nil {
				return fmt.Errorf("wait empty: %w", err)
			}
		}
		// Reading cgroup.procs is cheap; a short poll keeps teardown
		// latency near the kernel's own exit time.
		time.Sleep(delay)
		if delay < time.Millisecond {
			delay *= 2
		}
	}
}

// OOMKilled reads the memory controller's verdict: true only when its
// accounting recorded an OOM kill in this group (memory.events oom_kill on
// v2, memory.oom_control oom_kill on v1). Read it before Remove.
func (g *Group) OOMKilled() (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removed {
		return false, fmt.Errorf("oom verdict of group %s: already removed", g.name)
	}
	ok, err := g.b.oomKilled()
	if err != nil {
		return false, fmt.Errorf("oom verdict of group %s: %w", g.name, err)
	}
	return ok, nil
}

// MemoryLimit is the group's memory limit in bytes (0 when none).
func (g *Group) MemoryLimit() int64 { return g.b.memoryLimit() }

// Limits reads the limits the group really has from its control files
// (memory.max or memory.limit_in_bytes, pids.max, cpu.max or
// cpu.cfs_quota_us), zero where a controller is missing or unlimited.
func (g *Group) Limits() (Limits, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removed {
		return Limits{}, nil
	}
	l, err := g.b.limits()
	if err != nil {
		return l, fmt.Errorf("limits of group %s: %w", g.name, err)
	}
	return l, nil
}

// Stats reads live figures; zero where a controller is missing.
func (g *Group) Stats() (Stats, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removed {
		return Stats{}, nil
	}
	s, err := g.b.stats()
	if err != nil {
		return s, fmt.Errorf("stats of group %s: %w", g.name, err)
	}
	return s, nil
}

// Remove kills what is left, waits until the group is empty (up to
// timeout) and removes its directories. Idempotent.
func (g *Group) Remove(timeout time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removed {
		return nil
	}
	if _, err := g.b.kill(); err != nil {
		return fmt.Errorf("remove group %s: %w", g.name, err)
	}
	if err := waitEmpty(g.b, timeout); err != nil {
		return fmt.Errorf("remove group %s: %w", g.name, err)
	}
	if err := g.b.remove(); err != nil {
		return fmt.Errorf("remove group %s: %w", g.name, err)
	}
	g.removed = true
	return nil
}
