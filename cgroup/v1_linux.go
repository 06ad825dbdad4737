package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/hashicorp/go-hclog"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// v1Wanted are the v1 hierarchies the pool uses, freezer and pids first: the
// kernel places itself in this order, so that a tree kill finds it as early
// as possible. cpuset, devices and blkio are left alone (cpuset needs cpus
// and mems set before a task may join).
var v1Wanted = []string{"freezer", "pids", "memory", "cpu", "cpuacct"}

// v1Pool is the pool parent on legacy and hybrid hosts.
type v1Pool struct {
	mount     string
	parentRel string
	subs      []cgroup1.Subsystem
	names     []string // controller names of subs, same order
	parent    cgroup1.Cgroup
	dirs      []string // parent dir per hierarchy, deduplicated
	created   []string // parent dirs this instance created
	cfg       Config
	memsw     bool
	adopted   []string // dead owners' state dirs of adopted parent dirs
	// udir is the pool parent on a hybrid host's cgroup2 mount ("" when
	// unused). That hierarchy has no controllers but gives what v1 lacks:
	// clone3 placement and an atomic cgroup.kill of the whole tree.
	udir string
}

func newV1Pool(cfg Config, log hclog.Logger) (poolBackend, Info, error) {
	p := &v1Pool{mount: cfg.Mount, parentRel: filepath.Clean("/" + cfg.Parent), cfg: cfg}
	seen := map[string]bool{}
	for _, name := range v1Wanted {
		var st unix.Statfs_t
		root := filepath.Join(cfg.Mount, name)
		if err := unix.Statfs(root, &st); err != nil || st.Type != unix.CGROUP_SUPER_MAGIC {
			continue
		}
		p.subs = append(p.subs, newV1Subsystem(cfg.Mount, name))
		p.names = append(p.names, name)
		dir := filepath.Join(root, p.parentRel)
		if real, err := filepath.EvalSymlinks(root); err == nil {
			dir = filepath.Join(real, p.parentRel) // cpu,cpuacct co-mounted
		}
		if !seen[dir] {
			seen[dir] = true
			p.dirs = append(p.dirs, dir)
		}
	}
	if len(p.subs) == 0 {
		return nil, Info{}, fmt.Errorf("no v1 hierarchy of %v mounted: %w", v1Wanted, ErrUnsupported)
	}
	_, err := os.Stat(filepath.Join(cfg.Mount, "memory", "memory.memsw.limit_in_bytes"))
	p.memsw = err == nil
	// v1 cgroupfs takes no xattr unless mounted with -o xattr: the cgroup2
	// sibling's marker names the daemon whose marker file lists these dirs.
	hint := markOwner(filepath.Join(cfg.Mount, "unified", p.parentRel))
	for _, dir := range p.dirs {
		created, from, err := ensureParentDir(dir, cfg, hint)
		if err != nil {
			p.undo()
			return nil, Info{}, err
		}
		p.adopted = appendNew(p.adopted, from)
		if created {
			p.created = append(p.created, dir)
		}
	}
	p.setupUnified(log)
	hier := cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) { return p.subs, nil })
	p.parent, err = cgroup1.Load(cgroup1.StaticPath(p.parentRel), hier)
	if err != nil {
		p.undo()
		return nil, Info{}, fmt.Errorf("load parent %s: %w", p.parentRel, err)
	}
	info := Info{
		Controllers:    append([]string(nil), p.names...),
		Parents:        append([]string(nil), p.dirs...),
		Placement:      "the kernel writes 0 into its groups' cgroup.procs before any user code",
		Kill:           "freezer: freeze, SIGKILL every member, thaw",
		MemswAvailable: p.memsw,
		AdoptedFrom:    p.adopted,
	}
	if !p.has("freezer") {
		info.Kill = "SIGKILL every member, repeated until empty (no freezer hierarchy)"
	}
	if p.udir != "" {
		info.Placement = "clone3 into a group on the cgroup2 mount, then the kernel writes 0 into its v1 groups' cgroup.procs before any user code"
		info.Kill = "cgroup.kill on the cgroup2 mount, then SIGKILL of anything left in the v1 groups"
	}
	log.Debug("v1 hierarchies", "controllers", p.names, "memsw", p.memsw)
	return p, info, nil
}

func newV1Subsystem(mount, name string) cgroup1.Subsystem {
	switch name {
	case "freezer":
		return cgroup1.NewFreezer(mount)
	case "pids":
		return cgroup1.NewPids(mount)
	case "memory":
		return cgroup1.NewMemory(mount, cgroup1.OptionalSwap())
	case "cpu":
		return cgroup1.NewCpu(mount)
	default:
		return cgroup1.NewCpuacct(mount)
	}
}

func (p *v1Pool) has(name string) bool {
	for _, n := range p.names {
		if n == name {
			return true
		}
	}
	return false
}

// setupUnified uses the hybrid host's cgroup2 mount for placement and
// kill when it has cgroup.kill (Linux >= 5.14). By hand: the library's
// cgroup2 manager assumes a unified host.
func (p *v1Pool) setupUnified(log hclog.Logger) {
	root := filepath.Join(p.mount, "unified")
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return
	}
	dir := filepath.Join(root, p.parentRel)
	created, from, err := ensureParentDir(dir, p.cfg, "")
	if err != nil {
		log.Warn("cgroup2 mount not usable for kernel kill", "dir", dir, "error", err)
		return
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		if created {
			_ = os.Remove(dir)
		}
		return
	}
	if created {
		p.created = append(p.created, dir)
	}
	p.adopted = appendNew(p.adopted, from)
	p.udir = dir
	p.dirs = append(p.dirs, dir)
}

// undo removes the parent dirs this instance created (all empty).
func (p *v1Pool) undo() {
	for _, d := range p.created {
		_ = os.Remove(d)
	}
}

func (p *v1Pool) newGroup(name string, res *specs.LinuxResources) (groupBackend, error) {
	r := *res
	if r.Memory != nil && !p.memsw && r.Memory.Swap != nil {
		m := *r.Memory
		m.Swap = nil // no memsw accounting: swap cannot be capped on v1
		r.Memory = &m
	}
	cg, err := p.parent.New(name, &r)
	if err == nil && p.udir != "" {
		err = os.Mkdir(filepath.Join(p.udir, name), 0o755)
	}
	if err != nil {
		g := p.group(name, cg)
		_ = g.remove()
		return nil, err
	}
	g := p.group(name, cg)
	if r.Memory != nil && r.Memory.Limit != nil {
		g.memLimit = *r.Memory.Limit
	}
	return g, nil
}

func (p *v1Pool) group(name string, cg cgroup1.Cgroup) *v1Group {
	g := &v1Group{cg: cg, names: p.names}
	if p.udir != "" {
		g.udir = filepath.Join(p.udir, name)
	}
	seen := map[string]bool{}
	for _, n := range p.names {
		dir := filepath.Join(p.mount, n, p.parentRel, name)
		if real, err := filepath.EvalSymlinks(filepath.Join(p.mount, n)); err == nil {
			dir = filepath.Join(real, p.parentRel, name)
		}
		g.byName = append(g.byName, dir)
		if !seen[dir] {
			seen[dir] = true
			g.dirs = append(g.dirs, dir)
		}
	}
	return g
}

func (p *v1Pool) sweep(log hclog.Logger) (SweepResult, error) {
	var res SweepResult
	names := map[string]bool{}
	for _, dir := range p.dirs {
		kids, err := listKernelChildren(dir, p.cfg.Marker, p.cfg.StateDir)
		if err != nil {
			return res, err
		}
		for _, k := range kids {
			names[k] = true
		}
	}
	var errs []error
	for name := range names {
		cg, err := p.parent.New(name, &specs.LinuxResources{}) // loads; MkdirAll keeps what exists
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := sweepOne(p.group(name, cg), name, log, &res); err != nil {
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
}

func (p *v1Pool) close() error {
	var errs []error
	for _, d := range p.dirs {
		if ok, err := isMarked(d, p.cfg.Marker, p.cfg.StateDir); err != nil || !ok {
			continue // never remove what is not ours
		}
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove parent %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

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
