package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3/cgroup2"
	"golang.org/x/sys/unix"
)

// v2Group is one kernel's v2 group.
type v2Group struct {
	m        *cgroup2.Manager
	dir      string
	hasKill  bool
	memLimit int64
}

func (g *v2Group) placementFiles() []string { return nil }

func (g *v2Group) killFile() string {
	if !g.hasKill {
		return ""
	}
	return filepath.Join(g.dir, "cgroup.kill")
}

// openFD opens the group for clone3(CLONE_INTO_CGROUP), which takes an
// O_PATH or O_RDONLY directory fd.
func (g *v2Group) openFD() (*os.File, error) {
	fd, err := unix.Open(g.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), g.dir), nil
}

// chown hands the kernel uid only cgroup.kill, which the runner writes when
// its host dies; clone3 placement needs nothing from the kernel.
func (g *v2Group) chown(uid, gid int) error {
	if !g.hasKill {
		return nil
	}
	return os.Chown(g.killFile(), uid, gid)
}

func (g *v2Group) procs() ([]int, error) {
	pids, err := g.m.Procs(true)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out, nil
}

// kill writes cgroup.kill by hand, and without cgroup.kill freezes, kills
// and thaws by hand: the library's Kill falls back on any write error to a
// sequence that also reaps the killed processes, which would steal the
// kernel's exit status from its owner.
func (g *v2Group) kill() (int, error) {
	pids, _ := g.procs()
	if g.hasKill {
		err := os.WriteFile(g.killFile(), []byte("1"), 0)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return len(pids), err
		}
		return len(pids), nil
	}
	freeze := filepath.Join(g.dir, "cgroup.freeze")
	_ = os.WriteFile(freeze, []byte("1"), 0)
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		if v, ok, _ := readKV(filepath.Join(g.dir, "cgroup.events"), "frozen"); ok && v == 1 {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	pids, err := g.procs()
	for _, pid := range pids {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	if terr := os.WriteFile(freeze, []byte("0"), 0); terr != nil && err == nil && !errors.Is(terr, os.ErrNotExist) {
		err = terr
	}
	return len(pids), err
}

// oomKilled reads oom_kill (and oom_group_kill) from memory.events.
func (g *v2Group) oomKilled() (bool, error) {
	path := filepath.Join(g.dir, "memory.events")
	n, _, err := readKV(path, "oom_kill")
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	gk, _, _ := readKV(path, "oom_group_kill")
	return n > 0 || gk > 0, nil
}

func (g *v2Group) memoryLimit() int64 { return g.memLimit }

func (g *v2Group) stats() (Stats, error) {
	var s Stats
	m, err := g.m.StatFiltered(cgroup2.StatPids | cgroup2.StatCPU | cgroup2.StatMemory)
	if err != nil {
		return s, err
	}
	if m.Memory != nil {
		s.MemoryCurrent = int64(m.Memory.Usage)
		s.MemoryPeak = int64(m.Memory.MaxUsage)
	}
	if m.Pids != nil {
		s.Pids = int64(m.Pids.Current)
	}
	if m.CPU != nil {
		s.CPUTime = time.Duration(m.CPU.UsageUsec) * time.Microsecond
	}
	return s, nil
}

func (g *v2Group) remove() error {
	if err := g.m.Delete(); err != nil && !errors.Is(err, os.ErrNotExist) && !strings.Contains(err.Error(), "no such file") {
		return fmt.Errorf("delete %s: %w", g.dir, err)
	}
	return nil
}
