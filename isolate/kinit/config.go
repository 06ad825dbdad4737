package kinit

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// Arg0 is the argv[0] the daemon gives the re-executed binary; together
// with EnvConfig it marks a process as a kernel init.
const Arg0 = "kernpool-init"

// EnvConfig carries the JSON Config to the init, EnvSeccomp its filters
// (base64 programs joined by commas: a JSON string would cost the init a
// tenth of a millisecond to scan). The init removes both from the
// environment the interpreter gets.
const (
	EnvConfig  = "KERNPOOL_INIT"
	EnvSeccomp = "KERNPOOL_INIT_SECCOMP"
)

// StatusFD is the init's end of the status pipe (the daemon's ExtraFiles[0]).
const StatusFD = 3

// DefaultTmpSize is the size of each private tmpfs when Config.TmpSize is 0.
const DefaultTmpSize = 64 << 20

// DefaultPtyMax is how many ptys a kernel's own devpts holds when
// Config.PtyMax is 0.
const DefaultPtyMax = 16

// TmpInodes is the inode count of a private tmpfs of size bytes: one per
// 4 KiB page, at least 1024. A kernel cannot spend more inodes than that
// however small its files.
func TmpInodes(size int64) int64 { return max(1024, size/4096) }

// Config is what the daemon asks the init to do for one kernel.
type Config struct {
	// Path, Args and Dir are the interpreter command the init forks.
	Path string   `json:"path"`
	Args []string `json:"args"`
	Dir  string   `json:"dir"`
	// UID and GID are the kernel's credentials (-1: keep the init's).
	UID int `json:"uid"`
	GID int `json:"gid"`
	// CgroupProcs are v1 cgroup.procs files the init writes "0" into first
	// (on v2 the daemon already cloned it into the kernel's group).
	CgroupProcs []string `json:"cgroup_procs,omitempty"`
	// Rlimits are set before the interpreter starts.
	Rlimits []Rlimit `json:"rlimits,omitempty"`
	// Network keeps the host network: the daemon did not give the init a
	// network namespace of its own, so there is no loopback to bring up.
	Network bool `json:"network"`
	// TmpSize is the size in bytes of each private tmpfs (0: DefaultTmpSize).
	TmpSize int64 `json:"tmp_size"`
	// Keep are directories (the state dir, which holds the staging dir and
	// the spill dir, and the cwd) that stay visible at their path when they
	// lie under /tmp, /var/tmp or /dev/shm: they are bound back into the
	// private tmpfs.
	Keep []string `json:"keep,omitempty"`
	// Private are more host directories a kernel uid could write (found by
	// the daemon at start: world-writable ones like /run/lock, and those a
	// range uid or gid owns): each gets a private tmpfs like /tmp.
	Private []string `json:"private,omitempty"`
	// ReadOnly are host directories a kernel uid could write that must not
	// be hidden (not sticky scratch dirs): each is bound read-only.
	ReadOnly []string `json:"read_only,omitempty"`
	// Staging is the kernel's staging dir; Hide the directory holding every
	// kernel's: mounts below Hide other than Staging are removed from the
	// kernel's mount table (they name other kernels).
	Staging string `json:"staging,omitempty"`
	Hide    string `json:"hide,omitempty"`
	// PtyMax is the size of the kernel's own devpts instance (0: DefaultPtyMax).
	PtyMax int `json:"pty_max,omitempty"`
	// KillFile is the kernel's cgroup.kill as the daemon sees it; in the
	// kernel's cgroup namespace it is cgroup.kill at the cgroup2 mount's
	// root, and the interpreter's environment says so.
	KillFile string `json:"kill_file,omitempty"`
	// hostKillFile is KillFile as the daemon gave it, once setup replaced
	// KillFile with the in-namespace path.
	hostKillFile string
	// BaseMounts makes only the mounts of the earlier sandbox (private
	// /tmp, /var/tmp, /dev/shm and /proc): benchmarks set it to measure
	// what the others cost; the daemon never does.
	BaseMounts bool `json:"base_mounts,omitempty"`
	// Seccomp are the raw BPF programs (struct sock_filter arrays in native
	// byte order) the init loads, compiled once by the daemon.
	Seccomp [][]byte `json:"-"`
	// Peer is the daemon's pid: the init compares its namespaces with it.
	Peer int `json:"peer"`
	// MemoryMerge lets the host's samepage merging (KSM) share the kernel's
	// identical pages with other merging kernels: the init opts itself and
	// everything it forks in (prctl PR_SET_MEMORY_MERGE) and starts the
	// interpreter without address-space randomisation and with HashSeed as
	// PYTHONHASHSEED, so that kernels of one profile lay out the same
	// pages. docs/design.md, "Sharing idle kernels' pages", says what
	// tenants give up for it.
	MemoryMerge bool `json:"memory_merge,omitempty"`
	// HashSeed is the interpreter's PYTHONHASHSEED under MemoryMerge.
	HashSeed uint32 `json:"hash_seed,omitempty"`
	// NoReaper keeps the Go supervisor: the init does everything up to the
	// exec into the reaper, then falls back as when the exec fails. Tests
	// set it to check that fallback; the daemon never does.
	NoReaper bool `json:"no_reaper,omitempty"`
	// Probe: set everything up, check that the seccomp filter refuses a
	// new user namespace, report and exit 0 without forking anything.
	Probe bool `json:"probe,omitempty"`
}

// Rlimit is one resource limit; Name is lower case without RLIMIT_.
type Rlimit struct {
	Name string `json:"name"`
	Soft uint64 `json:"soft"`
	Hard uint64 `json:"hard"`
}

// RlimitNames are the resources an init sets by name (setrlimit(2)'s
// RLIMIT_*, lower case without the prefix): the daemon validates a
// config's rlimits against this one list.
func RlimitNames() []string {
	return []string{"core", "nofile", "nproc", "fsize", "as", "data", "stack", "cpu", "memlock"}
}

// Env renders c as the EnvConfig and EnvSeccomp entries of the init's
// environment.
func (c Config) Env() ([]string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode init config: %w", err)
	}
	progs := make([]string, len(c.Seccomp))
	for i, p := range c.Seccomp {
		progs[i] = base64.StdEncoding.EncodeToString(p)
	}
	return []string{EnvConfig + "=" + string(b), EnvSeccomp + "=" + strings.Join(progs, ",")}, nil
}

// decode reads the two values Env made.
func decode(config, seccomp string) (Config, error) {
	var c Config
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		return c, fmt.Errorf("decode init config: %w", err)
	}
	for _, p := range strings.Split(seccomp, ",") {
		if p == "" {
			continue
		}
		prog, err := base64.StdEncoding.DecodeString(p)
		if err != nil {
			return c, fmt.Errorf("decode init seccomp: %w", err)
		}
		c.Seccomp = append(c.Seccomp, prog)
	}
	if c.TmpSize == 0 {
		c.TmpSize = DefaultTmpSize
	}
	if c.PtyMax == 0 {
		c.PtyMax = DefaultPtyMax
	}
	return c, nil
}
