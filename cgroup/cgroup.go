package cgroup

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Mode is the host's cgroup layout.
type Mode int

// Host cgroup modes.
const (
	// ModeNone: no cgroupfs is mounted (or not Linux).
	ModeNone Mode = iota
	// ModeLegacy: only v1 hierarchies.
	ModeLegacy
	// ModeHybrid: v1 controller hierarchies plus a cgroup2 mount (usually
	// without controllers) at <mount>/unified.
	ModeHybrid
	// ModeUnified: one cgroup v2 hierarchy.
	ModeUnified
)

func (m Mode) String() string {
	switch m {
	case ModeLegacy:
		return "legacy (cgroup v1)"
	case ModeHybrid:
		return "hybrid (cgroup v1 controllers + cgroup2 mount)"
	case ModeUnified:
		return "unified (cgroup v2)"
	default:
		return "none"
	}
}

// DefaultParent is the prefix of the pool parent group's default name
// (ParentFor), and the name normParent falls back to without a state dir.
const DefaultParent = "kernpool"

// ParentFor is the default pool parent of the daemon with state dir
// stateDir: "kernpool-" and the first 12 hex digits of the SHA-256 of its
// absolute path, so that two daemons with different state dirs never share
// a parent (and never sweep each other's kernels).
func ParentFor(stateDir string) string {
	if abs, err := filepath.Abs(stateDir); err == nil {
		stateDir = abs
	}
	sum := sha256.Sum256([]byte(filepath.Clean(stateDir)))
	return DefaultParent + "-" + hex.EncodeToString(sum[:])[:12]
}

// DefaultMount is where cgroupfs is mounted.
const DefaultMount = "/sys/fs/cgroup"

// MarkerXattr is the extended attribute that marks a pool parent group.
const MarkerXattr = "trusted.kernpool.owner"

// MarkerFile is the file under Config.StateDir listing the parent paths this
// pool created where cgroupfs does not take the marker xattr.
const MarkerFile = "cgroup-parents"

// Config configures a Manager.
type Config struct {
	// Parent names the pool's parent group. Absolute ("/kernpool") counts
	// from the hierarchy root; relative ("kernpool") is created under the
	// daemon's own group when that group is delegated (v2), else from the
	// root. Empty means ParentFor(StateDir).
	Parent string
	// Marker identifies this pool (the daemon's state directory); it is the
	// value of the marker xattr. Required.
	Marker string
	// StateDir holds the marker file fallback. Required.
	StateDir string
	// OwnerLock is the file, inside the state dir another daemon marked a
	// parent with, that this daemon holds an flock on while it lives
	// (".kernpool.lock"). With it, a parent marked by a state dir whose lock
	// nobody holds is stale: New adopts it (marks it as its own) and Sweep
	// clears it. A parent whose owner holds the lock is refused with
	// ErrTaken. Empty: any parent marked by another state dir is refused.
	OwnerLock string
	// Mount is the cgroupfs mount root (default /sys/fs/cgroup).
	Mount string
	// Delegated forces (true) or forbids (false) treating the daemon's own
	// v2 group as delegated; nil detects it from systemd's
	// trusted.delegate/user.delegate xattr.
	Delegated *bool
	// Logger receives the manager's logs; nil discards them.
	Logger hclog.Logger
}

// Info describes what the manager found and uses.
type Info struct {
	// Mode is the host's cgroup layout.
	Mode Mode
	// Controllers the pool can use for its kernels (memory, pids, cpu, ...).
	Controllers []string
	// Parents are the pool parent directories, one per hierarchy.
	Parents []string
	// Delegated: the daemon's own v2 group is delegated to it.
	Delegated bool
	// DaemonLeaf is the leaf group the daemon moved itself into ("" if none).
	DaemonLeaf string
	// Placement says how a kernel enters its group.
	Placement string
	// Kill says how a group's tree is killed.
	Kill string
	// MemswAvailable: v1 memory+swap accounting exists (memory.memsw.*).
	MemswAvailable bool
	// AdoptedFrom lists the state dirs of dead daemons whose stale parent
	// was adopted; Sweep clears their kernel groups, and their staging
	// dirs (<state dir>/kernels/<id>) are the caller's to remove.
	AdoptedFrom []string
}

// Stats are live resource figures of one group.
type Stats struct {
	MemoryCurrent int64
	MemoryPeak    int64
	Pids          int64
	CPUTime       time.Duration
}

// Limits are the limits a group really has, read back from its control
// files (0: none, or no controller for it).
type Limits struct {
	// MemoryMax is the memory limit in bytes.
	MemoryMax int64
	// PidsMax is the task limit.
	PidsMax int64
	// CPUMax is the CPU quota in cores.
	CPUMax float64
}

// SweepResult counts what a sweep removed.
type SweepResult struct {
	// Groups lists the kernel ids whose leftover groups were removed.
	Groups []string
	// Killed counts the processes killed in them.
	Killed int
}

// Manager owns the pool parent group. Create it with New.
type Manager struct {
	log    hclog.Logger
	info   Info
	b      poolBackend
	mu     sync.Mutex
	closed bool
}

// poolBackend is the per-mode implementation of a Manager.
type poolBackend interface {
	newGroup(name string, res *specs.LinuxResources) (groupBackend, error)
	sweep(log hclog.Logger) (SweepResult, error)
	close() error
}

// groupBackend is the per-mode implementation of a Group.
type groupBackend interface {
	placementFiles() []string
	killFile() string
	openFD() (*os.File, error)
	chown(uid, gid int) error
	kill() (int, error)
	procs() ([]int, error)
	oomKilled() (bool, error)
	memoryLimit() int64
	limits() (Limits, error)
	stats() (Stats, error)
	remove() error
}

// Info reports what the manager found.
func (m *Manager) Info() Info {
	info := m.info
	info.Controllers = append([]string(nil), m.info.Controllers...)
	info.Parents = append([]string(nil), m.info.Parents...)
	info.AdoptedFrom = append([]string(nil), m.info.AdoptedFrom...)
	return info
}

// NewGroup creates the group of one kernel with the given limits.
func (m *Manager) NewGroup(name string, res *specs.LinuxResources) (*Group, error) {
	if !kernelName.MatchString(name) {
		return nil, fmt.Errorf("new group %q: %w (want k + 16 hex digits)", name, ErrInvalidName)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("new group %s: %w", name, ErrClosed)
	}
	if res == nil {
		res = &specs.LinuxResources{}
	}
	b, err := m.b.newGroup(name, res)
	if err != nil {
		return nil, fmt.Errorf("new group %s: %w", name, err)
	}
	return &Group{name: name, b: b, log: m.log.With("group", name)}, nil
}

// Sweep kills what is left in the kernel groups of a previous instance under
// the (marked) pool parent and removes those groups.
func (m *Manager) Sweep() (SweepResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return SweepResult{}, fmt.Errorf("sweep: %w", ErrClosed)
	}
	r, err := m.b.sweep(m.log)
	if err != nil {
		return r, fmt.Errorf("sweep: %w", err)
	}
	return r, nil
}

// Close removes the pool parent if it is empty (kernel groups still present
// keep it). Idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if err := m.b.close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// kernelName is the shape of kernel ids, the only children a sweep touches.
var kernelName = regexp.MustCompile(`^k[0-9a-f]{16}$`)

func normParent(p string) string {
	if p == "" {
		p = DefaultParent
	}
	return strings.TrimRight(p, "/")
}
