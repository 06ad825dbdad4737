package isolate

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/kernpool/kernpool/isolate/kinit"
	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/units"
)

// DefaultProfile is the profile a mode without its own profile uses.
const DefaultProfile = "default"

// maxPtyMax bounds Profile.PtyMax: a kernel's devpts must stay far below
// the host's kernel.pty.max (4096 by default, 1024 of them reserved).
const maxPtyMax = 256

// cpuPeriod is the CFS period used for CPU quotas (100 ms, the kernel default).
const cpuPeriod = 100000

// Config configures an Isolator. Start from DefaultConfig: the zero value
// turns every optional protection off.
type Config struct {
	// Isolation is what the daemon promises its kernels ("" means
	// kernel.IsolationSandbox): in sandbox mode New fails with ErrIsolation
	// when anything the configuration asks for cannot be applied here; in
	// process mode kernels get what the host offers and Report().Allows()
	// says in plain words what that permits.
	Isolation kernel.IsolationMode
	// CgroupParent names the pool's parent cgroup; "" derives it from the
	// state dir (cgroup.ParentFor). See cgroup.Config.Parent for absolute
	// vs relative names.
	CgroupParent string
	// OwnerLock is the lock file a live daemon holds in its state dir
	// (".kernpool.lock"): a cgroup parent marked by a state dir whose lock
	// nobody holds is stale and adopted (cgroup.Config.OwnerLock).
	OwnerLock string
	// ScrubDirs are the host's world-writable dirs cleared of a kernel
	// uid's files before the uid is leased again (DefaultScrubDirs() when
	// nil; empty but non-nil: none).
	ScrubDirs []string
	// CgroupEnabled puts each kernel in its own cgroup where the host
	// allows; false confines kernels by process group (and uid) only.
	CgroupEnabled bool
	// Profiles maps a profile name to its limits and namespaces. A mode
	// selects the profile of its name, else DefaultProfile.
	Profiles map[string]Profile
	// Ceiling bounds per-request overrides. A zero field means a request
	// may only lower that limit below its profile's value.
	Ceiling Limits
	// UIDRange is the inclusive [first, last] range of kernel uids (and
	// gids); it must have no /etc/passwd or /etc/group entries.
	UIDRange [2]int
	// PerOwnerUID gives all kernels of one owner one stable uid (owner
	// hashed into the range, next free on collision) instead of one uid
	// per live kernel.
	PerOwnerUID bool
	// UIDLockDir holds one lock file per leased kernel uid, shared by every
	// kernpool daemon on the host so that no two leases of one uid ever
	// overlap (default DefaultUIDLockDir).
	UIDLockDir string
	// RunAsUser runs kernels as uids from UIDRange; needs root.
	// DefaultConfig sets it when the daemon is root.
	RunAsUser bool
	// Rlimits are set by the runner before user code.
	Rlimits []Rlimit
	// NoNewPrivs makes the runner set PR_SET_NO_NEW_PRIVS before user code.
	NoNewPrivs bool
	// InitStep starts every kernel through the kernel init step (package
	// kinit): own mount, pid, ipc, uts and network namespaces, private
	// tmpfs on /tmp, /var/tmp and /dev/shm, a fresh /proc, umask 077 and a
	// seccomp filter, all before user code. Linux only; needs root.
	// DefaultConfig sets it when the daemon is root on Linux. New fails
	// (never degrades) when the init step does not work on this host.
	InitStep bool
	// InitPath is the executable re-executed as the init step; it must call
	// kinit.Main first thing in main. Default "/proc/self/exe": the running
	// binary, even after its file was replaced on disk.
	InitPath string
	// StateDir is the daemon's state directory (holds kernels/<id> staging
	// dirs); it also marks the pool's cgroups. Required.
	StateDir string
	// Logger receives the isolator's logs; nil discards them.
	Logger hclog.Logger
}

// Profile is the confinement of one mode's kernels.
type Profile struct {
	// Resources are the cgroup limits: Memory.Limit (and Memory.Swap, the
	// memory+swap total; equal to Limit when unset, i.e. no swap),
	// Pids.Limit, CPU.Quota/Period and CPU.Shares (weight).
	Resources *specs.LinuxResources
	// Network keeps the host network for kernels of this profile. Without
	// it, under InitStep, a kernel gets its own network namespace with only
	// loopback up: it reaches nothing outside, and no other kernel's
	// loopback or abstract sockets. Unix sockets by path (the tool RPC)
	// still work.
	Network bool
	// TmpSize is the size in bytes of each of the kernel's private /tmp,
	// /var/tmp and /dev/shm (InitStep; 0: 64 MiB). Their pages count
	// against the kernel's memory limit.
	TmpSize int64
	// PtyMax is how many ptys the kernel's own devpts instance holds
	// (InitStep; 0: 16). They count toward the host's kernel.pty.nr, but
	// never more than this per kernel.
	PtyMax int
	// NoNetwork, without InitStep, gives the kernel an empty network
	// namespace (loopback down). Under InitStep the network namespace is
	// the default and Network opts out of it.
	NoNetwork bool
	// PIDNamespace, without InitStep, gives the kernel its own pid
	// namespace (it is pid 1 there, with the host's /proc). Under InitStep
	// every kernel has one, with its own /proc and an init reaping orphans.
	PIDNamespace bool
	// PrivateTmp asks for private /tmp, /var/tmp and /dev/shm: always the
	// case under InitStep; refused without it (only the init step can mount).
	PrivateTmp bool
	// MemoryMerge opens the kernels' pages to the host's samepage merging
	// (KSM), started without address-space randomisation and with the
	// daemon's one hash seed so that their pages match: idle kernels then
	// share their identical pages, at the cost docs/design.md ("Sharing
	// idle kernels' pages") states. Needs InitStep; off by default.
	MemoryMerge bool
}

// Limits are per-request overrides (0 = the profile's value): the pool's
// own type, which the isolator's NewSandbox takes as pool.SandboxFactory.
type Limits = pool.Limits

// Rlimit is one resource limit the runner sets (setrlimit) before user code.
type Rlimit struct {
	// Name is the lower-case resource without RLIMIT_ ("core", "nofile").
	Name string
	// Soft and Hard are the limits.
	Soft, Hard uint64
}

// DefaultUIDLockDir is where daemons lock the kernel uids they lease.
const DefaultUIDLockDir = "/run/kernpool/uids"

// uidLockDir is the uid lock dir in use: UIDLockDir, or the default.
func (c *Config) uidLockDir() string {
	if c.UIDLockDir == "" {
		return DefaultUIDLockDir
	}
	return c.UIDLockDir
}

// DefaultConfig is the recommended configuration: cgroups on, a default
// profile of 1 GiB / 512 pids / no CPU cap, uids 60000-60999 when root, no
// core dumps, 1024 open files, no_new_privs.
func DefaultConfig(stateDir string) Config {
	return Config{
		Isolation:     kernel.IsolationSandbox,
		CgroupEnabled: true,
		Profiles:      map[string]Profile{DefaultProfile: {Resources: LimitsResources(Limits{MemoryMax: 1 << 30, PidsMax: 512})}},
		UIDRange:      [2]int{60000, 60999},
		RunAsUser:     os.Geteuid() == 0,
		InitStep:      os.Geteuid() == 0 && runtime.GOOS == "linux",
		Rlimits:       []Rlimit{{Name: "core"}, {Name: "nofile", Soft: 1024, Hard: 1024}},
		NoNewPrivs:    true,
		StateDir:      stateDir,
	}
}

// LimitsResources expresses l as runtime-spec resources (memory+swap = memory).
func LimitsResources(l Limits) *specs.LinuxResources {
	r := &specs.LinuxResources{}
	applyLimits(r, l)
	return r
}

func applyLimits(r *specs.LinuxResources, l Limits) {
	if l.MemoryMax > 0 {
		mem, swap := l.MemoryMax, l.MemoryMax
		if r.Memory == nil {
			r.Memory = &specs.LinuxMemory{}
		}
		r.Memory.Limit, r.Memory.Swap = &mem, &swap
	}
	if l.PidsMax > 0 {
		p := l.PidsMax
		r.Pids = &specs.LinuxPids{Limit: &p}
	}
	if l.CPUMax > 0 {
		q, period := int64(math.Round(l.CPUMax*cpuPeriod)), uint64(cpuPeriod)
		if r.CPU == nil {
			r.CPU = &specs.LinuxCPU{}
		}
		r.CPU.Quota, r.CPU.Period = &q, &period
	}
}

// profileLimits reads a profile's limits back as Limits (0 where unset).
func profileLimits(r *specs.LinuxResources) Limits {
	var l Limits
	if r == nil {
		return l
	}
	if r.Memory != nil && r.Memory.Limit != nil {
		l.MemoryMax = *r.Memory.Limit
	}
	if r.Pids != nil && r.Pids.Limit != nil {
		l.PidsMax = *r.Pids.Limit
	}
	if r.CPU != nil && r.CPU.Quota != nil && *r.CPU.Quota > 0 {
		period := uint64(cpuPeriod)
		if r.CPU.Period != nil && *r.CPU.Period > 0 {
			period = *r.CPU.Period
		}
		l.CPUMax = float64(*r.CPU.Quota) / float64(period)
	}
	return l
}

// Modes lists the configured profile names, sorted: the modes a request
// may name ("default" always works, and "" means it).
func (c *Config) Modes() []string {
	names := make([]string, 0, len(c.Profiles)+1)
	for n := range c.Profiles {
		names = append(names, n)
	}
	if _, ok := c.Profiles[DefaultProfile]; !ok {
		names = append(names, DefaultProfile)
	}
	sort.Strings(names)
	return names
}

// profile returns the profile mode selects; a mode without a profile is
// refused (ErrUnknownMode), never silently given the default profile.
func (c *Config) profile(mode string) (Profile, error) {
	if mode == "" {
		mode = DefaultProfile
	}
	if p, ok := c.Profiles[mode]; ok {
		return p, nil
	}
	if mode == DefaultProfile {
		return Profile{}, nil
	}
	return Profile{}, fmt.Errorf("mode %q: %w (known: %s)", mode, ErrUnknownMode, strings.Join(c.Modes(), ", "))
}

// resolve applies the request's overrides to mode's profile within the
// ceiling, returning a private copy of the resources.
func (c *Config) resolve(mode string, lim Limits) (*specs.LinuxResources, Profile, error) {
	p, err := c.profile(mode)
	if err != nil {
		return nil, p, err
	}
	if lim.MemoryMax < 0 || lim.PidsMax < 0 || lim.CPUMax < 0 || math.IsNaN(lim.CPUMax) || math.IsInf(lim.CPUMax, 0) {
		return nil, p, fmt.Errorf("limits %+v: %w: negative or not a number", lim, ErrBadLimit)
	}
	base := profileLimits(p.Resources)
	if err := overCeiling("memory_max", lim.MemoryMax, c.Ceiling.MemoryMax, base.MemoryMax, formatMemory); err != nil {
		return nil, p, err
	}
	if err := overCeiling("pids_max", lim.PidsMax, c.Ceiling.PidsMax, base.PidsMax, formatCount); err != nil {
		return nil, p, err
	}
	if err := overCeiling("cpu_max", lim.CPUMax, c.Ceiling.CPUMax, base.CPUMax, formatCores); err != nil {
		return nil, p, err
	}
	r := copyResources(p.Resources)
	applyLimits(r, lim)
	if r.Memory != nil && r.Memory.Limit != nil && r.Memory.Swap == nil {
		s := *r.Memory.Limit // no swap unless configured
		r.Memory.Swap = &s
	}
	return r, p, nil
}

// overCeiling refuses a requested limit (0: none) over the ceiling, or
// over the profile's value where no ceiling is set, in the field's units.
func overCeiling[T int64 | float64](field string, want, ceil, prof T, format func(T) string) error {
	bound, of := ceil, "the ceiling"
	if bound == 0 {
		bound, of = prof, "the profile's value (no ceiling is set)"
	}
	if want == 0 || bound <= 0 || want <= bound {
		return nil
	}
	return fmt.Errorf("%s %s: %w: at most %s, %s", field, format(want), ErrOverCeiling, format(bound), of)
}

// formatMemory is a byte count as operators write it (units.FormatBytes:
// 8GiB) and exactly; a count no binary unit divides is bytes alone.
func formatMemory(n int64) string {
	exact := strconv.FormatInt(n, 10)
	if human := units.FormatBytes(n); human != exact+"B" {
		return human + " (" + exact + " bytes)"
	}
	return exact + " bytes"
}

func formatCount(n int64) string   { return strconv.FormatInt(n, 10) }
func formatCores(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// copyResources copies the parts of r the pool sets, so that overrides
// never write through to the profile.
func copyResources(r *specs.LinuxResources) *specs.LinuxResources {
	out := &specs.LinuxResources{}
	if r == nil {
		return out
	}
	if r.Memory != nil {
		m := *r.Memory
		out.Memory = &m
	}
	if r.Pids != nil {
		p := *r.Pids
		out.Pids = &p
	}
	if r.CPU != nil {
		c := *r.CPU
		out.CPU = &c
	}
	return out
}

// validate checks the configuration (without touching the host).
func (c *Config) validate() error {
	if c.StateDir == "" || !strings.HasPrefix(c.StateDir, "/") && !isWindowsAbs(c.StateDir) {
		return fmt.Errorf("%w: StateDir %q must be an absolute path", ErrBadConfig, c.StateDir)
	}
	if _, err := kernel.ParseIsolationMode(string(c.Isolation)); err != nil {
		return fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if c.InitStep && runtime.GOOS != "linux" {
		return fmt.Errorf("%w: the kernel init step (namespaces, private tmpfs, seccomp) exists only on Linux: %w", ErrBadConfig, ErrUnsupported)
	}
	if c.RunAsUser && (c.UIDRange[0] <= 0 || c.UIDRange[1] < c.UIDRange[0]) {
		return fmt.Errorf("%w: UIDRange %d-%d: want 0 < first <= last", ErrBadConfig, c.UIDRange[0], c.UIDRange[1])
	}
	for name, p := range c.Profiles {
		l := profileLimits(p.Resources)
		if l.MemoryMax < 0 || l.PidsMax < 0 || l.CPUMax < 0 {
			return fmt.Errorf("%w: profile %q has a negative limit", ErrBadConfig, name)
		}
		if p.TmpSize < 0 {
			return fmt.Errorf("%w: profile %q has a negative tmp_size", ErrBadConfig, name)
		}
		if p.PtyMax < 0 || p.PtyMax > maxPtyMax {
			return fmt.Errorf("%w: profile %q: pty_max %d: want 0 (default) to %d", ErrBadConfig, name, p.PtyMax, maxPtyMax)
		}
		if p.MemoryMerge && !c.InitStep {
			return fmt.Errorf("%w: profile %q: memory_merge needs the kernel init step (Linux, a root daemon): %w", ErrBadConfig, name, ErrUnsupported)
		}
		if p.PrivateTmp && !c.InitStep {
			return fmt.Errorf("%w: profile %q: private /tmp needs the kernel init step (Linux, a root daemon): %w", ErrBadConfig, name, ErrUnsupported)
		}
	}
	for _, r := range c.Rlimits {
		if !slices.Contains(kinit.RlimitNames(), r.Name) {
			return fmt.Errorf("%w: unknown rlimit %q", ErrBadConfig, r.Name)
		}
		if r.Soft > r.Hard {
			return fmt.Errorf("%w: rlimit %s soft %d > hard %d", ErrBadConfig, r.Name, r.Soft, r.Hard)
		}
	}
	return nil
}

func isWindowsAbs(p string) bool { return len(p) > 2 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') }

// rlimitEnv renders the KERNPOOL_RLIMITS value: "core=0:0,nofile=1024:1024".
func rlimitEnv(rl []Rlimit) string {
	parts := make([]string, 0, len(rl))
	for _, r := range rl {
		parts = append(parts, fmt.Sprintf("%s=%d:%d", r.Name, r.Soft, r.Hard))
	}
	return strings.Join(parts, ",")
}
