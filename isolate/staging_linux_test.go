package isolate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/internal/testenv"
)

// mountTmpfs mounts a small tmpfs on dir (created), unmounted at cleanup
// if still there.
func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
}

// mounted says whether dir is a mount point of this mount namespace.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// TestUnmountStaging: Release's unmount of a kernel's staging tmpfs
// removes the mount and its mount point and forgets it (a second call has
// nothing to do).
func TestUnmountStaging(t *testing.T) {
	testenv.RequireRoot(t)
	dir := filepath.Join(testTempDir(t), "k1")
	mountTmpfs(t, dir)
	s := &Sandbox{id: "k1", log: hclog.NewNullLogger(), stagingMount: dir}
	s.unmountStaging()
	if mounted(t, dir) {
		t.Fatalf("%s still mounted", dir)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("mount point left: %v", err)
	}
	if s.stagingMount != "" {
		t.Fatalf("stagingMount = %q after the unmount, want \"\"", s.stagingMount)
	}
}

// TestUnmountStale: New's sweep unmounts every staging tmpfs a dead
// instance left below <state>/kernels, and that is no error; mounts
// elsewhere stay.
func TestUnmountStale(t *testing.T) {
	testenv.RequireRoot(t)
	state := testTempDir(t)
	stale := []string{filepath.Join(state, "kernels", "a"), filepath.Join(state, "kernels", "b")}
	other := filepath.Join(state, "other")
	for _, d := range append(stale, other) {
		mountTmpfs(t, d)
	}
	if err := unmountStale(state); err != nil {
		t.Fatalf("unmountStale: %v", err)
	}
	for _, d := range stale {
		if mounted(t, d) {
			t.Errorf("%s still mounted", d)
		}
	}
	if !mounted(t, other) {
		t.Errorf("%s, outside kernels/, was unmounted", other)
	}
}
