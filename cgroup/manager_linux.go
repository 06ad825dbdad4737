package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// DetectMode reports the cgroup layout mounted at mount ("" = /sys/fs/cgroup).
// By hand: the library's cgroups.Mode() is hard-wired to /sys/fs/cgroup and
// cached process-wide.
func DetectMode(mount string) Mode {
	if mount == "" {
		mount = DefaultMount
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mount, &st); err != nil {
		return ModeNone
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return ModeUnified
	}
	if err := unix.Statfs(filepath.Join(mount, "unified"), &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return ModeHybrid
	}
	for _, c := range v1Wanted {
		if err := unix.Statfs(filepath.Join(mount, c), &st); err == nil && st.Type == unix.CGROUP_SUPER_MAGIC {
			return ModeLegacy
		}
	}
	return ModeNone
}

// New detects the host's mode, then creates and marks the pool parent (or
// checks the marker of an existing one). On v2 with a delegated daemon
// group it moves the daemon into a leaf first. Errors wrap ErrUnsupported
// when cgroups cannot be used at all, ErrForeign for an unmarked parent.
func New(cfg Config) (*Manager, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Marker == "" || cfg.StateDir == "" {
		return nil, errors.New("config: a marker and a state dir are required")
	}
	if cfg.Mount == "" {
		cfg.Mount = DefaultMount
	}
	if cfg.Parent == "" {
		cfg.Parent = ParentFor(cfg.StateDir)
	}
	cfg.Parent = normParent(cfg.Parent)
	if filepath.Clean("/"+cfg.Parent) == "/" {
		return nil, fmt.Errorf("parent %q: %w", cfg.Parent, ErrInvalidName)
	}
	log := cfg.Logger.Named("cgroup")
	mode := DetectMode(cfg.Mount)
	m := &Manager{log: log}
	var err error
	switch mode {
	case ModeUnified:
		m.b, m.info, err = newV2Pool(cfg, log)
	case ModeLegacy, ModeHybrid:
		m.b, m.info, err = newV1Pool(cfg, log)
	default:
		return nil, fmt.Errorf("no cgroupfs at %s: %w", cfg.Mount, ErrUnsupported)
	}
	if err != nil {
		if errors.Is(err, os.ErrPermission) || errors.Is(err, unix.EROFS) {
			err = fmt.Errorf("%w (%v)", ErrUnsupported, err)
		}
		return nil, err
	}
	m.info.Mode = mode
	log.Debug("cgroup parent ready", "mode", mode.String(), "parents", m.info.Parents, "controllers", m.info.Controllers)
	return m, nil
}
