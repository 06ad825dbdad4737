package isolate

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/isolate/kinit"
	"github.com/kernpool/kernpool/kernel"
)

// Isolator makes the Sandbox of each new kernel. Create it with New.
type Isolator struct {
	core
	cg       *cgroup.Manager // nil: process-group fallback
	uids     *uidPool        // nil: kernels keep the daemon's uid
	facts    initFacts
	useInit  bool     // kernels start through the init step (it works here)
	seccomp  [][]byte // compiled filters the init step loads
	initPath string   // the init step's binary (ResolveInitPath)
	scrubs   scrubStats
	// hostPaths are the host dirs a kernel uid could write: the init step
	// makes each private or read-only (found at New under the init step).
	hostPaths hostPaths
	// baseMounts: only the earlier sandbox's mounts (benchmarks set it to
	// measure the others; kinit.Config.BaseMounts).
	baseMounts bool
	// noReaper: kernels' inits keep the Go supervisor (tests set it to
	// check the fallback; kinit.Config.NoReaper).
	noReaper bool
	// hashSeed is the PYTHONHASHSEED of every kernel of a MemoryMerge
	// profile: one per daemon start, so that their dicts lay out alike.
	hashSeed uint32
}

// New validates cfg, detects the host's cgroup mode, creates (or checks
// the marker of, or adopts when stale) the pool parent group, sweeps what
// a dead instance left in it (processes, groups, their staging dirs), and
// reserves the uid range. In sandbox mode (the default) it fails with
// ErrIsolation, before touching any cgroup where it can, when kernels
// would get less than cfg asks for; in process mode it falls back to what
// the host offers and Report() says what is lost and what that allows.
func New(cfg Config) (*Isolator, error) {
	i := &Isolator{}
	if err := i.init(cfg); err != nil {
		return nil, err
	}
	cfg = i.cfg
	if err := binary.Read(rand.Reader, binary.NativeEndian, &i.hashSeed); err != nil {
		return nil, fmt.Errorf("hash seed: %w", err)
	}
	merge, err := checkMerge(cfg)
	if err != nil {
		return nil, err
	}
	i.facts = probeInit(cfg)
	i.report = Report{Isolation: cfg.isolationMode(), DaemonUID: os.Geteuid(), Platform: runtime.GOOS,
		NoNewPrivs: cfg.NoNewPrivs, Rlimits: rlimitEnv(cfg.Rlimits), Seccomp: i.facts.Seccomp, MemoryMerge: merge}
	root := os.Geteuid() == 0
	if err := i.checkNamespaces(root); err != nil {
		return nil, err
	}
	if i.facts.Probed && !i.facts.Works {
		i.report.Lost = append(i.report.Lost, "the kernel init step (namespaces, private /tmp, seccomp): "+i.facts.Why)
		i.report.Advice = append(i.report.Advice, "see `kernpool doctor`")
	}
	if err := i.setupUIDs(root); err != nil {
		return nil, err
	}
	i.findHostPaths()
	if err := i.report.enforce(); err != nil {
		return nil, err // before any cgroup is touched
	}
	i.setupCgroups()
	if err := i.report.enforce(); err != nil {
		_ = i.Close()
		return nil, err
	}
	if i.uids != nil {
		// After the sweep: leftovers of a dead instance no longer hold uids.
		i.uids.tainted = taintedUIDs(cfg.UIDRange[0], cfg.UIDRange[1])
		i.report.TaintedUIDs = len(i.uids.tainted)
		if n := len(i.uids.tainted); n > 0 {
			i.log.Warn("kernel uids with running processes are not used", "count", n)
		}
	}
	uid := i.report.DaemonUID
	if i.uids != nil {
		uid = -1 // one from the range per kernel
	}
	i.report.Profiles = profileReports(cfg, i.facts, uid)
	if w := i.report.Warning(); w != "" {
		i.log.Warn("reduced kernel isolation", "detail", w)
	}
	return i, nil
}

// checkNamespaces prepares the namespaces the configuration asks for:
// under a working init step (probed in New) its seccomp filters; else the
// older per-profile clone flags, which need root. A failed init step is a
// Lost protection (New's caller decides through enforce).
func (i *Isolator) checkNamespaces(root bool) error {
	names := make([]string, 0, len(i.cfg.Profiles))
	for n := range i.cfg.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	if i.facts.Works {
		var err error
		if i.seccomp, err = compileSeccomp(); err != nil {
			return err
		}
		i.useInit, i.initPath = true, i.facts.Path
		i.report.InitStep, i.report.InitPath, i.report.Seccomp = true, i.initPath, true
		i.report.Supervisor = supervisorText(kinit.ReaperProbe())
		i.report.Namespaces = []string{"mnt", "pid", "ipc", "uts"}
		for _, n := range names {
			if !i.cfg.Profiles[n].Network {
				i.report.Namespaces = append(i.report.Namespaces, "net (profile "+n+")")
			}
		}
		return nil
	}
	if !root {
		i.dropNamespaces(names)
	}
	for _, n := range names {
		p := i.cfg.Profiles[n]
		if p.NoNetwork {
			i.report.Namespaces = append(i.report.Namespaces, "net (profile "+n+")")
		}
		if p.PIDNamespace {
			i.report.Namespaces = append(i.report.Namespaces, "pid (profile "+n+")")
		}
	}
	return nil
}

// dropNamespaces records, for a daemon that is not root, the namespaces
// profiles ask for as Lost (CLONE_NEWNET and CLONE_NEWPID need root: sandbox
// mode then refuses to start, process mode runs without them) and takes
// them out of this isolator's copy of the profiles, so that kernels start
// and every report says what they really get.
func (i *Isolator) dropNamespaces(names []string) {
	profiles := make(map[string]Profile, len(i.cfg.Profiles))
	dropped := false
	for _, n := range names {
		p := i.cfg.Profiles[n]
		if p.NoNetwork || p.PIDNamespace {
			i.report.Lost = append(i.report.Lost, "a network and pid namespace of their own (profile "+n+"; namespaces need a root daemon)")
			p.NoNetwork, p.PIDNamespace, dropped = false, false, true
		}
		profiles[n] = p
	}
	if dropped {
		i.report.Advice = append(i.report.Advice, "run the daemon as root for namespaces")
	}
	i.cfg.Profiles = profiles
}

func (i *Isolator) setupUIDs(root bool) error {
	first, last := i.cfg.UIDRange[0], i.cfg.UIDRange[1]
	switch {
	case !root:
		i.report.Lost = append(i.report.Lost, fmt.Sprintf("a uid of their own (the daemon is not root, so kernels would run as its uid %d "+
			"and could read each other's files and the daemon's, signal each other, and drive the daemon's API socket)", os.Geteuid()))
		i.report.Advice = append(i.report.Advice, "run the daemon as root, so that each kernel gets an unprivileged uid of its own")
		return nil
	case !i.cfg.RunAsUser:
		i.report.Lost = append(i.report.Lost, "a uid of their own (users are disabled, so kernels would run as root)")
		i.report.Advice = append(i.report.Advice, "enable kernel users (users { enabled = true })")
		return nil
	}
	if hits := rangeEntries(idFiles, first, last); len(hits) > 0 {
		return fmt.Errorf("%w: uid range %d-%d overlaps %s: choose a range with no users or groups", ErrBadConfig, first, last, strings.Join(hits, ", "))
	}
	lockDir := i.cfg.uidLockDir()
	// Its parent (/run/kernpool by default) is where the daemon's socket
	// and state dir live too: kernels must be able to traverse it.
	if err := os.MkdirAll(filepath.Dir(lockDir), 0o711); err != nil {
		return fmt.Errorf("uid lock dir: %w", err)
	}
	if err := os.Mkdir(lockDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("uid lock dir: %w", err)
	}
	if err := checkUIDLockDir(lockDir, first, last); err != nil {
		return err
	}
	i.uids = newUIDPool(first, last, i.cfg.PerOwnerUID, lockDir, nil)
	dirs := i.cfg.ScrubDirs
	if dirs == nil {
		dirs = DefaultScrubDirs()
	}
	i.uids.scrub = func(uid int) {
		res, err := scrubUID(dirs, uid)
		i.scrubs.record(res, err)
		if err != nil {
			// Not a reason to withhold the uid: what is left is the previous
			// tenant's, and a sandboxed kernel's private mounts hide it.
			i.log.Warn("a previous kernel of this uid left entries the scrub did not remove", "uid", uid,
				"removed", res.Removed, "visited", res.Visited, "error", err)
		}
	}
	i.uids.busy = func(uid int) bool { return len(procUIDs()[uid]) > 0 }
	i.report.RunAsUser, i.report.UIDFirst, i.report.UIDLast, i.report.PerOwnerUID = true, first, last, i.cfg.PerOwnerUID
	return nil
}

// findHostPaths walks the host once for the directories kernel uids could
// write, which every kernel's init makes private or read-only. A walk that
// fails is a Lost protection: sandbox mode refuses to start.
func (i *Isolator) findHostPaths() {
	if !i.useInit || i.uids == nil {
		return
	}
	// The state dir only: its staging dirs are the kernels' own. The uid
	// lock dir is walked like any other: setupUIDs refused one kernels
	// could write, and anything below it they could write is found.
	hp, err := findHostPaths(i.cfg.UIDRange[0], i.cfg.UIDRange[1], []string{i.cfg.StateDir})
	if err != nil {
		i.report.Lost = append(i.report.Lost, "private or read-only host paths: "+err.Error())
		i.report.Advice = append(i.report.Advice, "see `kernpool doctor`")
		return
	}
	i.hostPaths = hp
	i.report.PrivatePaths, i.report.ReadOnlyPaths = hp.Private, hp.ReadOnly
	i.log.Info("host paths kernels could write are private or read-only in every kernel",
		"private", strings.Join(hp.Private, " "), "read_only", strings.Join(hp.ReadOnly, " "), "dirs", hp.Dirs, "took", hp.Took)
}

func taintedUIDs(first, last int) map[int]bool {
	t := map[int]bool{}
	for uid := range procUIDs() {
		if uid >= first && uid <= last {
			t[uid] = true
		}
	}
	return t
}

func (i *Isolator) setupCgroups() {
	i.report.CgroupMode = cgroup.DetectMode("").String()
	runAs := i.uids != nil
	if !i.cfg.CgroupEnabled {
		i.report.CgroupReason = "disabled by configuration"
		i.report.Lost = append(i.report.Lost, cgroupLosses(runAs, i.cfg.PerOwnerUID)...)
		i.report.Advice = append(i.report.Advice, "enable cgroups in the configuration")
		return
	}
	m, err := cgroup.New(cgroup.Config{Parent: i.cfg.CgroupParent, Marker: i.cfg.StateDir, StateDir: i.cfg.StateDir,
		OwnerLock: i.cfg.OwnerLock, Logger: i.log})
	if err != nil {
		i.report.CgroupReason = err.Error()
		i.report.Lost = append(i.report.Lost, cgroupLosses(runAs, i.cfg.PerOwnerUID)...)
		i.report.Advice = append(i.report.Advice, cgroupAdvice(err))
		return
	}
	i.cg = m
	info := m.Info()
	i.report.CgroupActive = true
	i.report.Controllers, i.report.Parents = info.Controllers, info.Parents
	i.report.Delegated, i.report.DaemonLeaf = info.Delegated, info.DaemonLeaf
	i.report.Placement, i.report.Kill = info.Placement, info.Kill
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !contains(info.Controllers, c) {
			i.report.Lost = append(i.report.Lost, c+" limits (controller not available to the pool)")
			i.report.Advice = append(i.report.Advice, "enable the "+c+" controller for the pool parent's ancestors (Delegate=yes under systemd)")
		}
	}
	res, err := m.Sweep()
	if err != nil {
		i.log.Error("sweep of leftover kernel groups incomplete", "error", err)
	}
	if os.Geteuid() == 0 {
		if err := unmountStale(i.cfg.StateDir); err != nil {
			i.log.Error("cannot unmount a dead instance's staging dirs", "error", err)
		}
	}
	i.report.Swept = len(res.Groups)
	// Staging dirs hold tenant files: ours, and those of a dead daemon
	// whose parent was adopted (its state dir is the parent's old marker).
	stateDirs := append([]string{i.cfg.StateDir}, info.AdoptedFrom...)
	for _, id := range res.Groups {
		for _, sd := range stateDirs {
			if err := os.RemoveAll(filepath.Join(sd, "kernels", id)); err != nil {
				i.log.Error("cannot remove a leftover staging dir", "kernel", id, "error", err)
			}
		}
	}
}

func cgroupAdvice(err error) string {
	switch {
	case errors.Is(err, cgroup.ErrTaken):
		return "give this daemon its own cgroup parent (--cgroup-parent NAME), or stop the daemon that holds it"
	case errors.Is(err, cgroup.ErrForeign):
		return "remove the unmarked group or set another cgroup parent"
	case os.Geteuid() != 0:
		return "run the daemon as root, or under systemd with Delegate=yes"
	default:
		return "mount cgroupfs writable (a container needs a delegated cgroup namespace)"
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// reserve reserves what one kernel needs: its uid and its cgroup with
// mode's profile and the request's overrides (bounded by the ceiling).
func (i *Isolator) reserve(id, owner, mode string, lim Limits) (*Sandbox, error) {
	res, prof, err := i.admit(id, mode, lim)
	if err != nil {
		return nil, err
	}
	defer i.mu.Unlock()
	s := &Sandbox{iso: i, id: id, profile: prof, uid: -1, gid: -1, log: i.log.With("kernel", id), pg: kernel.NewProcessGroup()}
	if i.uids != nil {
		if s.uid, err = i.uids.acquire(owner); err != nil {
			return nil, fmt.Errorf("new sandbox %s: %w", id, err)
		}
		s.gid = s.uid
	}
	if i.cg != nil {
		if s.group, err = i.cg.NewGroup(id, res); err != nil {
			if s.uid >= 0 {
				i.uids.release(s.uid)
			}
			return nil, fmt.Errorf("new sandbox %s: %w", id, err)
		}
	}
	if err := s.fillIsolation(profileLimits(res)); err != nil {
		if s.group != nil {
			_ = s.group.Remove(releaseTimeout)
		}
		if s.uid >= 0 {
			i.uids.release(s.uid)
		}
		return nil, fmt.Errorf("new sandbox %s: %w", id, err)
	}
	return s, nil
}

// CheckAccess reports whether a kernel uid can execute interpreter and
// enter cwd ("" skips it), with a message naming the path and mode bits at
// fault. The daemon calls it at start for its configured defaults.
func (i *Isolator) CheckAccess(interpreter, cwd string) error {
	uid, gid := os.Geteuid(), os.Getegid()
	if i.uids != nil {
		uid, gid = i.cfg.UIDRange[0], i.cfg.UIDRange[0] // every range uid is an "other"
	}
	if err := canUse(interpreter, uid, gid, false); err != nil {
		return fmt.Errorf("interpreter: %w", err)
	}
	if cwd != "" {
		if err := canUse(cwd, uid, gid, true); err != nil {
			return fmt.Errorf("cwd: %w", err)
		}
	}
	return nil
}

// Close removes the pool parent group if no kernel group is left in it.
// Sandboxes already made keep working. Idempotent.
func (i *Isolator) Close() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return nil
	}
	i.closed = true
	if i.cg != nil {
		if err := i.cg.Close(); err != nil {
			return fmt.Errorf("close: %w", err)
		}
	}
	return nil
}

// supervisorText is doctor's line on what supervises each kernel's
// interpreter, from kinit.ReaperProbe: the reaper where the init can
// become it, else the Go supervisor the init keeps, and why.
func supervisorText(size int, err error) string {
	if err != nil {
		return "the init's Go supervisor (about 1 MiB more per kernel): " + err.Error()
	}
	return fmt.Sprintf("reaper: once the interpreter runs, each kernel's init execs into a %d-byte reaper (ps: %s)", size, kinit.ReaperName)
}
