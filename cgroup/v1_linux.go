package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/hashicorp/go-hclog"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The v1 pool: one parent per v1 hierarchy; its groups are in
// v1group_linux.go, the pinned freezer group in v1freezer_linux.go and the
// hybrid host's cgroup2 parent in v1hybrid_linux.go (as v2_linux.go and
// v2group_linux.go split the unified pool).

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
	// pin is the empty freezer group kept FROZEN for the pool's life ("" when
	// unused); see pinFreezer.
	pin string
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
	p.pinFreezer(log)
	log.Debug("v1 hierarchies", "controllers", p.names, "memsw", p.memsw)
	return p, p.info(), nil
}

// info describes the pool's placement and kill to Manager.Info.
func (p *v1Pool) info() Info {
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
	if p.pin != "" {
		info.Kill += " (an empty pinned group stays frozen, so no kill switches the kernel's freezer static key)"
	}
	if p.udir != "" {
		info.Placement = "clone3 into a group on the cgroup2 mount, then the kernel writes 0 into its v1 groups' cgroup.procs before any user code"
		info.Kill = "cgroup.kill on the cgroup2 mount, then SIGKILL of anything left in the v1 groups"
	}
	return info
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
	if err := p.unpinFreezer(); err != nil {
		errs = append(errs, err)
	}
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
