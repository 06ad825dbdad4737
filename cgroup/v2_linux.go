package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup2"
	"github.com/hashicorp/go-hclog"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// v2Wanted are the v2 controllers the pool enables for its kernels.
var v2Wanted = []string{"memory", "pids", "cpu"}

// DaemonLeaf is the leaf the daemon moves itself into under a delegated group.
const DaemonLeaf = "supervisor"

// v2Pool is the pool parent on a unified host.
type v2Pool struct {
	mount    string
	rel      string // parent, relative to mount, with a leading "/"
	dir      string
	created  bool
	ctrls    []string
	hasKill  bool
	marker   string
	stateDir string
}

func newV2Pool(cfg Config, log hclog.Logger) (poolBackend, Info, error) {
	own, err := ownV2Group()
	if err != nil {
		return nil, Info{}, err
	}
	p := &v2Pool{mount: cfg.Mount, marker: cfg.Marker, stateDir: cfg.StateDir}
	info := Info{Placement: "clone3(CLONE_INTO_CGROUP): the kernel starts inside its group"}
	base := "/"
	if !strings.HasPrefix(cfg.Parent, "/") && own != "/" {
		info.Delegated = isDelegated(filepath.Join(cfg.Mount, own), cfg.Delegated)
		if info.Delegated {
			base = own
		}
	}
	p.rel = filepath.Join("/", base, cfg.Parent)
	p.dir = filepath.Join(cfg.Mount, p.rel)
	if base != "/" || own == "/" {
		// The daemon's group is ours to arrange: delegated to us, or the root.
		leaf, err := enableInOwnGroup(filepath.Join(cfg.Mount, base), log)
		if err != nil {
			return nil, Info{}, err
		}
		info.DaemonLeaf = leaf
	}
	var from string
	p.created, from, err = ensureParentDir(p.dir, cfg, "")
	if err != nil {
		return nil, Info{}, err
	}
	info.AdoptedFrom = appendNew(nil, from)
	avail, _ := readFields(filepath.Join(p.dir, "cgroup.controllers"))
	p.ctrls = intersect(v2Wanted, avail)
	// By hand: the library's ToggleControllers writes every ancestor's
	// subtree_control; only our own parent is ours to change.
	if len(p.ctrls) > 0 {
		if err := writeSubtree(p.dir, p.ctrls); err != nil {
			p.undo()
			return nil, Info{}, err
		}
	}
	_, err = os.Stat(filepath.Join(p.dir, "cgroup.kill"))
	p.hasKill = err == nil
	info.Controllers = append([]string(nil), p.ctrls...)
	info.Parents = []string{p.dir}
	info.Kill = "cgroup.kill"
	if !p.hasKill {
		info.Kill = "cgroup.freeze, SIGKILL every member, thaw (kernel < 5.14: no cgroup.kill)"
	}
	log.Debug("v2 parent", "dir", p.dir, "controllers", p.ctrls, "delegated", info.Delegated)
	return p, info, nil
}

// ownV2Group reads the daemon's own group from /proc/self/cgroup ("0::/x").
func ownV2Group() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("read own cgroup: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Clean("/" + rest), nil
		}
	}
	return "", fmt.Errorf("own cgroup: no v2 entry: %w", ErrUnsupported)
}

// isDelegated: systemd (>= 251) marks a Delegate=yes unit's group with the
// trusted.delegate (system) or user.delegate (user manager) xattr.
func isDelegated(dir string, force *bool) bool {
	if force != nil {
		return *force
	}
	buf := make([]byte, 16)
	for _, name := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := unix.Getxattr(dir, name, buf); err == nil && strings.TrimSpace(string(buf[:n])) == "1" {
			return true
		}
	}
	return false
}

// enableInOwnGroup enables the wanted controllers in the daemon's own group
// (delegated, or the root). A non-root group with processes cannot have
// subtree controllers (no internal processes), so the daemon first moves
// itself into the leaf <own>/supervisor, as go-judge and nsjail do. By hand:
// the library has no notion of this move.
func enableInOwnGroup(own string, log hclog.Logger) (string, error) {
	avail, err := readFields(filepath.Join(own, "cgroup.controllers"))
	if err != nil {
		return "", fmt.Errorf("read controllers of %s: %w", own, err)
	}
	want := intersect(v2Wanted, avail)
	if len(want) == 0 {
		return "", nil
	}
	err = writeSubtree(own, want)
	if err == nil || !errors.Is(err, unix.EBUSY) {
		return "", err
	}
	leaf := filepath.Join(own, DaemonLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create daemon leaf: %w", err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return "", fmt.Errorf("move daemon into %s: %w", leaf, err)
	}
	log.Info("moved the daemon into a leaf group", "leaf", leaf)
	if err := writeSubtree(own, want); err != nil {
		return leaf, fmt.Errorf("%w (other processes left in %s?)", err, own)
	}
	return leaf, nil
}

func writeSubtree(dir string, ctrls []string) error {
	parts := make([]string, len(ctrls))
	for i, c := range ctrls {
		parts[i] = "+" + c
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(parts, " ")), 0); err != nil {
		return fmt.Errorf("enable %v in %s: %w", ctrls, dir, err)
	}
	return nil
}

func readFields(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

func intersect(want, have []string) []string {
	var out []string
	for _, w := range want {
		for _, h := range have {
			if w == h {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

func (p *v2Pool) undo() {
	if p.created {
		_ = os.Remove(p.dir)
	}
}

func (p *v2Pool) has(c string) bool { return len(intersect([]string{c}, p.ctrls)) == 1 }

// resources converts a runtime-spec request to v2 values, dropping what the
// parent has no controller for and grouping the kernel's OOM kills.
func (p *v2Pool) resources(res *specs.LinuxResources) *cgroup2.Resources {
	r := cgroup2.ToResources(res)
	if !p.has("memory") {
		r.Memory = nil
	} else if r.Memory != nil {
		group := true
		r.Memory.OOMGroup = &group // the kernel is one unit: OOM ends all of it
		if r.Memory.Swap == nil && r.Memory.Max != nil {
			zero := int64(0)
			r.Memory.Swap = &zero // no swap unless configured
		}
	}
	if !p.has("pids") {
		r.Pids = nil
	}
	if !p.has("cpu") {
		r.CPU = nil
	}
	return r
}

func (p *v2Pool) newGroup(name string, res *specs.LinuxResources) (groupBackend, error) {
	parent, err := cgroup2.Load(p.rel, cgroup2.WithMountpoint(p.mount))
	if err != nil {
		return nil, err
	}
	// NewChild with nil resources: with resources it would toggle
	// controllers in every ancestor (see writeSubtree).
	m, err := parent.NewChild(name, nil)
	if err != nil {
		return nil, err
	}
	g := &v2Group{m: m, dir: filepath.Join(p.dir, name), hasKill: p.hasKill}
	if err := m.Update(p.resources(res)); err != nil {
		_ = os.Remove(g.dir)
		return nil, fmt.Errorf("set limits: %w", err)
	}
	if res.Memory != nil && res.Memory.Limit != nil && p.has("memory") {
		g.memLimit = *res.Memory.Limit
	}
	return g, nil
}

func (p *v2Pool) sweep(log hclog.Logger) (SweepResult, error) {
	var res SweepResult
	kids, err := listKernelChildren(p.dir, p.marker, p.stateDir)
	if err != nil {
		return res, err
	}
	var errs []error
	for _, name := range kids {
		m, err := cgroup2.Load(filepath.Join(p.rel, name), cgroup2.WithMountpoint(p.mount))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		g := &v2Group{m: m, dir: filepath.Join(p.dir, name), hasKill: p.hasKill}
		if err := sweepOne(g, name, log, &res); err != nil {
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
}

func (p *v2Pool) close() error {
	if ok, err := isMarked(p.dir, p.marker, p.stateDir); err != nil || !ok {
		return nil // never remove what is not ours
	}
	if err := os.Remove(p.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove parent %s: %w", p.dir, err)
	}
	return nil
}
