package kinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// privateDirs get a private tmpfs each, with the host directories the
// daemon found a kernel uid could write (Config.Private). A tenant's files
// there are invisible to every other kernel and vanish with the kernel's
// mount namespace; their pages are charged to the kernel's memory cgroup,
// and their inodes are bounded (TmpInodes).
func privateDirs(extra []string) []string {
	return append([]string{"/tmp", "/var/tmp", "/dev/shm"}, extra...)
}

// keptDir is a directory opened before the private tmpfs hid it.
type keptDir struct {
	path string
	fd   int
}

// setupMounts makes the mount tree private (nothing propagates back to the
// host), moves into a cgroup namespace and mounts its cgroup view, hides
// other kernels' staging mounts, binds the kernel-writable host dirs that
// are not scratch read-only, mounts the private tmpfs, binds the kept
// directories back, mounts a devpts and mqueue of the kernel's own and a
// /proc of its pid namespace. It returns the in-namespace path of
// cfg.KillFile.
func setupMounts(cfg Config) (string, error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return "", fmt.Errorf("make mounts private: %w", err)
	}
	if cfg.BaseMounts {
		cfg.Private, cfg.ReadOnly, cfg.Hide = nil, nil, ""
	}
	var mounts []mountEntry
	kill := cfg.KillFile
	if !cfg.BaseMounts {
		var err error
		if mounts, err = readMounts(); err != nil {
			return "", err
		}
		if kill, err = cgroupNamespace(mounts, cfg.KillFile, cfg.CgroupProcs); err != nil {
			return "", err
		}
	}
	// Before the tmpfs can shadow them (a shadowed mount cannot be reached
	// by its path to be removed) and before the kept binds copy them.
	if err := hideOthers(mounts, cfg.Hide, cfg.Staging); err != nil {
		return "", err
	}
	masked, err := maskedDirs(privateDirs(cfg.Private))
	if err != nil {
		return "", err
	}
	kept, err := openKept(cfg.Keep, masked)
	defer func() {
		for _, k := range kept {
			_ = unix.Close(k.fd)
		}
	}()
	if err != nil {
		return "", err
	}
	if err := readOnly(outside(cfg.ReadOnly, masked)); err != nil {
		return "", err
	}
	opts := "mode=1777,size=" + strconv.FormatInt(cfg.TmpSize, 10) + ",nr_inodes=" + strconv.FormatInt(TmpInodes(cfg.TmpSize), 10)
	for _, dir := range masked {
		flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
		if dir == "/dev/shm" {
			flags |= unix.MS_NOEXEC
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
			return "", fmt.Errorf("mount tmpfs on %s: %w", dir, err)
		}
	}
	for _, k := range kept {
		if err := bindBack(k); err != nil {
			return "", err
		}
	}
	if !cfg.BaseMounts {
		if err := privatePts(cfg.PtyMax); err != nil {
			return "", err
		}
		if err := privateMqueue(mounts); err != nil {
			return "", err
		}
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return "", fmt.Errorf("mount /proc: %w", err)
	}
	return kill, nil
}

// outside is dirs without those under (or equal to) a masked dir: the
// private tmpfs hides them anyway.
func outside(dirs, masked []string) []string {
	var out []string
	for _, d := range dirs {
		if !underAny(d, masked) {
			out = append(out, d)
		}
	}
	return out
}

// maskedDirs resolves dirs (one may be a symlink to another), skips those
// that do not exist (there is nothing to share there) and those inside
// another.
func maskedDirs(dirs []string) ([]string, error) {
	var out []string
	for _, d := range dirs {
		real, err := filepath.EvalSymlinks(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", d, err)
		}
		out = append(out, real)
	}
	// Shortest first; one inside another is hidden by the outer tmpfs.
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) < len(out[j]) })
	var top []string
	for _, d := range out {
		if !underAny(d, top) {
			top = append(top, d)
		}
	}
	return top, nil
}

// openKept opens each kept directory that lies under a masked one, by its
// resolved path. A kept dir inside another kept one needs no bind of its
// own (the outer bind shows it), so it is skipped.
func openKept(paths, masked []string) ([]keptDir, error) {
	var real []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", p, err)
		}
		// A kept dir that is itself a masked one (a cwd of /tmp) is not
		// bound back: the kernel gets its private one there.
		if underAny(r, masked) && !slices.Contains(masked, r) {
			real = append(real, r)
		}
	}
	sort.Slice(real, func(i, j int) bool { return len(real[i]) < len(real[j]) })
	var kept []keptDir
	for i, r := range real {
		if underAny(r, real[:i]) {
			continue
		}
		fd, err := unix.Open(r, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return kept, fmt.Errorf("open %s: %w", r, err)
		}
		kept = append(kept, keptDir{path: r, fd: fd})
	}
	return kept, nil
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// bindBack recreates k's path inside the private tmpfs (parents 0711, root's)
// and binds the original directory there through its open fd.
func bindBack(k keptDir) error {
	if err := os.MkdirAll(filepath.Dir(k.path), 0o711); err != nil {
		return fmt.Errorf("keep %s: %w", k.path, err)
	}
	if err := os.Mkdir(k.path, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("keep %s: %w", k.path, err)
	}
	src := "/proc/self/fd/" + strconv.Itoa(k.fd)
	if err := unix.Mount(src, k.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("keep %s: bind: %w", k.path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(k.fd, &st); err != nil {
		return fmt.Errorf("keep %s: %w", k.path, err)
	}
	if st.Mode&0o002 != 0 {
		// World-writable (a cwd like /tmp/shared): what the kernel wrote
		// there would be the host's. Read-only; its submounts keep theirs.
		if err := unix.Mount("", k.path, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return fmt.Errorf("keep %s: read-only: %w", k.path, err)
		}
	}
	return nil
}
