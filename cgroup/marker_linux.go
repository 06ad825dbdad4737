package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// The marker is written by hand: the cgroups library has no xattr support.

// markDir marks dir as this pool's parent: the xattr, or, where cgroupfs
// refuses xattrs, a line in the marker file.
func markDir(dir, marker, stateDir string) error {
	err := unix.Setxattr(dir, MarkerXattr, []byte(marker), 0)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOTSUP) && !errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("mark %s: %w", dir, err)
	}
	if err := os.MkdirAll(stateDir, 0o711); err != nil {
		return fmt.Errorf("mark %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(stateDir, MarkerFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("mark %s: %w", dir, err)
	}
	if _, err := fmt.Fprintln(f, dir); err != nil {
		_ = f.Close()
		return fmt.Errorf("mark %s: %w", dir, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("mark %s: %w", dir, err)
	}
	return nil
}

// isMarked reports whether dir carries this pool's marker.
func isMarked(dir, marker, stateDir string) (bool, error) {
	buf := make([]byte, 4096)
	n, err := unix.Getxattr(dir, MarkerXattr, buf)
	switch {
	case err == nil:
		return string(buf[:n]) == marker, nil
	case errors.Is(err, unix.ENODATA):
		return false, nil
	case errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP):
		return listedInMarkerFile(dir, stateDir)
	default:
		return false, fmt.Errorf("read marker of %s: %w", dir, err)
	}
}

// markOwner returns the state dir another pool marked dir with, or "".
func markOwner(dir string) string {
	buf := make([]byte, 4096)
	n, err := unix.Getxattr(dir, MarkerXattr, buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

func listedInMarkerFile(dir, stateDir string) (bool, error) {
	f, err := os.Open(filepath.Join(stateDir, MarkerFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read marker file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == dir {
			return true, nil
		}
	}
	return false, sc.Err()
}

// ensureParentDir creates and marks dir, or checks the mark of an existing
// one: ours is used, a stale one (its owner's state-dir lock is free) is
// adopted, a live daemon's is refused with ErrTaken. hint is the state dir
// that marked a sibling parent dir (the hybrid cgroup2 mount), used where
// this hierarchy takes no xattr. created reports whether this call made
// it; adoptedFrom is the dead owner's state dir when it was adopted.
func ensureParentDir(dir string, cfg Config, hint string) (created bool, adoptedFrom string, err error) {
	if _, err := os.Lstat(dir); err == nil {
		ok, err := isMarked(dir, cfg.Marker, cfg.StateDir)
		if err != nil || ok {
			return false, "", err
		}
		owner, err := adoptParent(dir, cfg, hint)
		return false, owner, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, "", fmt.Errorf("create %s: %w", dir, err)
	}
	if err := markDir(dir, cfg.Marker, cfg.StateDir); err != nil {
		_ = os.Remove(dir)
		return false, "", err
	}
	return true, "", nil
}

// adoptParent marks a parent another daemon marked as ours, if that daemon
// is gone (nobody holds its state dir's lock). The safety rule holds: the
// dir was created and marked by a kernpool daemon (the trusted xattr only
// root can write, or the owner's own marker file lists it).
func adoptParent(dir string, cfg Config, hint string) (string, error) {
	owner := markOwner(dir)
	if owner == "" && hint != "" {
		if listed, _ := listedInMarkerFile(dir, hint); listed {
			owner = hint
		}
	}
	if owner == "" {
		return "", fmt.Errorf("%s: %w (remove it or choose another parent)", dir, ErrForeign)
	}
	if cfg.OwnerLock == "" {
		return "", fmt.Errorf("%s: %w: it belongs to the kernpool daemon with state dir %s (give each daemon its own cgroup parent)", dir, ErrForeign, owner)
	}
	live, err := ownerLive(owner, cfg.OwnerLock)
	if err != nil {
		return "", fmt.Errorf("check owner of %s: %w", dir, err)
	}
	if live {
		return "", fmt.Errorf("%s: %w: the daemon with state dir %s is running (give each daemon its own parent with --cgroup-parent, or stop that daemon)", dir, ErrTaken, owner)
	}
	if err := markDir(dir, cfg.Marker, cfg.StateDir); err != nil {
		return "", err
	}
	// Two daemons adopting at once: the xattr keeps the last writer.
	if ok, err := isMarked(dir, cfg.Marker, cfg.StateDir); err != nil || !ok {
		return "", fmt.Errorf("%s: %w: another daemon adopted it first", dir, ErrTaken)
	}
	cfg.Logger.Named("cgroup").Info("adopted a stale pool parent", "dir", dir, "previous_state_dir", owner)
	return owner, nil
}

// ownerLive reports whether a daemon holds the lock file lockName in its
// state dir stateDir. A missing lock file (or state dir) means no daemon.
func ownerLive(stateDir, lockName string) (bool, error) {
	if !filepath.IsAbs(stateDir) {
		return false, fmt.Errorf("marker %q is not an absolute state dir", stateDir)
	}
	fd, err := unix.Open(filepath.Join(stateDir, lockName), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open lock of %s: %w", stateDir, err)
	}
	defer unix.Close(fd)
	err = unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("probe lock of %s: %w", stateDir, err)
	}
	return false, nil // closing the fd drops the probe's shared lock
}

// listKernelChildren lists the kernel-id-named child groups of a marked dir.
func listKernelChildren(dir, marker, stateDir string) ([]string, error) {
	ok, err := isMarked(dir, marker, stateDir)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s: %w", dir, ErrForeign)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() && kernelName.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// readInts reads a cgroup.procs-style file of one integer per line.
func readInts(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		var v int
		if _, err := fmt.Sscan(f, &v); err == nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// readKV reads one "key value" line's value from a flat-keyed file.
func readKV(path, key string) (int64, bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			var v int64
			if _, err := fmt.Sscan(f[1], &v); err != nil {
				return 0, false, fmt.Errorf("parse %s %s: %w", path, key, err)
			}
			return v, true, nil
		}
	}
	return 0, false, nil
}

// sweepOne kills what is left in a leftover kernel group of a marked
// parent, waits until it is empty, removes it and records it in res.
func sweepOne(g groupBackend, name string, log hclog.Logger, res *SweepResult) error {
	n, _ := g.kill()
	if err := waitEmpty(g, 2*time.Second); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := g.remove(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	log.Info("swept leftover kernel group", "group", name, "killed", n)
	res.Groups = append(res.Groups, name)
	res.Killed += n
	return nil
}

// appendNew appends s to list unless it is empty or already there.
func appendNew(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
