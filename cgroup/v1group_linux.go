package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"golang.org/x/sys/unix"
)

// v1Group is one kernel's groups across the v1 hierarchies.
type v1Group struct {
	cg       cgroup1.Cgroup
	names    []string // controller names
	byName   []string // group dir per controller name (parallel to names)
	dirs     []string // deduplicated group dirs
	udir     string   // group on the hybrid cgroup2 mount ("" when unused)
	memLimit int64
}

func (g *v1Group) dir(controller string) string {
	for i, n := range g.names {
		if n == controller {
			return g.byName[i]
		}
	}
	return ""
}

func (g *v1Group) placementFiles() []string {
	out := make([]string, 0, len(g.dirs))
	for _, d := range g.dirs {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

func (g *v1Group) killFile() string {
	if g.udir == "" {
		return ""
	}
	return filepath.Join(g.udir, "cgroup.kill")
}

// openFD opens the cgroup2 group for clone3(CLONE_INTO_CGROUP); v1 groups
// cannot be cloned into.
func (g *v1Group) openFD() (*os.File, error) {
	if g.udir == "" {
		return nil, fmt.Errorf("clone into a v1 group: %w", ErrUnsupported)
	}
	fd, err := unix.Open(g.udir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), g.udir), nil
}

func (g *v1Group) chown(uid, gid int) error {
	files := g.placementFiles()
	if kf := g.killFile(); kf != "" {
		files = append(files, kf)
	}
	for _, f := range files {
		if err := os.Chown(f, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

func (g *v1Group) procs() ([]int, error) {
	seen := map[int]bool{}
	var out []int
	dirs := g.dirs
	if g.udir != "" {
		dirs = append(dirs[:len(dirs):len(dirs)], g.udir)
	}
	for _, d := range dirs {
		pids, err := readInts(filepath.Join(d, "cgroup.procs"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, pid := range pids {
			if !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out, nil
}

// kill freezes the group (bounded, by hand: the library's Freeze polls
// forever), SIGKILLs every member, and thaws so the signals are delivered.
// Frozen members cannot fork or exit, so the pid list is exact.
func (g *v1Group) kill() (int, error) {
	if g.udir != "" {
		return g.killUnified()
	}
	frz := g.dir("freezer")
	if frz != "" {
		if err := freezeV1(frz, 100*time.Millisecond); err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, err
		}
	}
	pids, err := g.procs()
	for _, pid := range pids {
		if pid > 0 {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
	if frz != "" {
		if terr := os.WriteFile(filepath.Join(frz, "freezer.state"), []byte("THAWED"), 0); terr != nil && !errors.Is(terr, os.ErrNotExist) && err == nil {
			err = terr
		}
	}
	return len(pids), err
}

// killUnified writes cgroup.kill (the kernel kills the tree atomically,
// forks included), then SIGKILLs anything in the v1 groups that is not in
// the cgroup2 group (nothing, unless it was moved there by hand).
func (g *v1Group) killUnified() (int, error) {
	pids, _ := g.procs()
	err := os.WriteFile(g.killFile(), []byte("1"), 0)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	for _, pid := range pids {
		if pid > 0 {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
	return len(pids), err
}

func freezeV1(dir string, timeout time.Duration) error {
	state := filepath.Join(dir, "freezer.state")
	if err := os.WriteFile(state, []byte("FROZEN"), 0); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(state)
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(b)) == "FROZEN" || time.Now().After(deadline) {
			return nil // a stuck FREEZING still stops most forks; WaitEmpty re-kills
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func (g *v1Group) oomKilled() (bool, error) {
	mem := g.dir("memory")
	if mem == "" {
		return false, nil
	}
	n, ok, err := readKV(filepath.Join(mem, "memory.oom_control"), "oom_kill")
	if err != nil {
		return false, err
	}
	if ok {
		return n > 0, nil
	}
	// Kernels before 4.13 lack the oom_kill counter: memory+swap reaching
	// its limit is the closest recorded fact.
	fc, err := os.ReadFile(filepath.Join(mem, "memory.memsw.failcnt"))
	if err != nil {
		return false, nil
	}
	return strings.TrimSpace(string(fc)) != "0", nil
}

func (g *v1Group) memoryLimit() int64 { return g.memLimit }

func (g *v1Group) stats() (Stats, error) {
	var s Stats
	if g.cg == nil {
		return s, nil
	}
	m, err := g.cg.Stat(cgroup1.IgnoreNotExist)
	if err != nil {
		return s, err
	}
	if m.Memory != nil && m.Memory.Usage != nil {
		s.MemoryCurrent = int64(m.Memory.Usage.Usage)
		s.MemoryPeak = int64(m.Memory.Usage.Max)
	}
	if m.Pids != nil {
		s.Pids = int64(m.Pids.Current)
	}
	if m.CPU != nil && m.CPU.Usage != nil {
		s.CPUTime = time.Duration(m.CPU.Usage.Total)
	}
	return s, nil
}

func (g *v1Group) remove() error {
	if g.udir != "" {
		if err := os.Remove(g.udir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if g.cg != nil {
		if err := g.cg.Delete(); err != nil && !errors.Is(err, cgroup1.ErrCgroupDeleted) {
			return err
		}
		return nil
	}
	var errs []error
	for _, d := range g.dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
