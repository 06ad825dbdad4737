package isolate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/isolate/kinit"
	"github.com/kernpool/kernpool/kernel"
)

var _ kernel.StagingMounter = (*Sandbox)(nil)

// MountStaging puts the kernel's staging dir on a tmpfs of its own under
// the init step: the profile's tmp_size, TmpInodes inodes, nosuid and
// nodev. Everything the kernel writes there (its TMPDIR is staging/tmp)
// is charged to its memory cgroup, fails with ENOSPC beyond the cap, and
// goes with Release; the kernel's HOME is its TMPDIR then. Without the init step (no root, process mode) the
// staging dir stays a plain directory.
func (s *Sandbox) MountStaging(staging string) (bool, error) {
	if !s.iso.useInit || s.iso.baseMounts {
		return false, nil
	}
	size := s.profile.TmpSize
	if size == 0 {
		size = kinit.DefaultTmpSize
	}
	opts := "mode=0700,size=" + strconv.FormatInt(size, 10) + ",nr_inodes=" + strconv.FormatInt(kinit.TmpInodes(size), 10)
	if err := unix.Mount("tmpfs", staging, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return false, fmt.Errorf("mount staging %s: %w", s.id, err)
	}
	s.mu.Lock()
	s.stagingMount = staging
	s.mu.Unlock()
	return true, nil
}

// unmountStaging undoes MountStaging (called by Release, once nothing of
// the kernel runs) and removes the then empty mount point; the kernel
// package removes the dir too, but not after a failed start.
func (s *Sandbox) unmountStaging() {
	if s.stagingMount == "" {
		return
	}
	if err := unix.Unmount(s.stagingMount, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		s.log.Error("cannot unmount the staging dir", "error", err)
		return
	}
	_ = os.Remove(s.stagingMount)
	s.stagingMount = ""
}

// unmountStale unmounts what a dead instance left mounted below
// <stateDir>/kernels: no kernel of this state dir is alive at New.
func unmountStale(stateDir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("stale staging mounts: %w", err)
	}
	prefix := filepath.Join(stateDir, "kernels") + "/"
	var errs []error
	for _, m := range parseMountinfo(string(b)) {
		if !strings.HasPrefix(m.point, prefix) {
			continue
		}
		if err := unix.Unmount(m.point, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m.point, err))
		}
	}
	return errors.Join(errs...)
}
