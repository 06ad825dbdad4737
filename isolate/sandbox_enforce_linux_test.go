package isolate

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/internal/testenv"
)

// A limit asked for that the kernel's cgroup does not have in force
// refuses the kernel in sandbox mode (fail closed), naming it. The group
// here was given no limit at all, so it reads every one back as none.
func TestSandboxRefusesLimitsNotInForce(t *testing.T) {
	testenv.RequireRoot(t)
	iso := newIso(t, func(c *Config) {
		c.Profiles = map[string]Profile{DefaultProfile: {Resources: LimitsResources(Limits{})}}
	})
	if iso.cg == nil {
		t.Skip("no cgroups on this host")
	}
	sb, err := iso.reserve(kernelID(t), "alice", DefaultProfile, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sb.Release() })
	for _, c := range []struct {
		want    Limits
		missing string // "": accepted
	}{
		{Limits{}, ""},
		{Limits{MemoryMax: 1 << 30}, "memory_max"},
		{Limits{PidsMax: 64}, "pids_max"},
		{Limits{CPUMax: 0.5}, "cpu_max"},
		{Limits{MemoryMax: 1 << 30, PidsMax: 64, CPUMax: 0.5}, "memory_max, pids_max, cpu_max"},
	} {
		err := sb.fillIsolation(c.want)
		if c.missing == "" {
			if err != nil {
				t.Errorf("%+v: %v, want accepted", c.want, err)
			}
			continue
		}
		if !errors.Is(err, ErrIsolation) || !strings.Contains(err.Error(), "does not enforce "+c.missing) {
			t.Errorf("%+v from a group with no limits: %v; want ErrIsolation naming %s", c.want, err, c.missing)
		}
	}
}

// Procs lists the kernel's processes from its cgroup while it runs, and
// nothing once it was released.
func TestSandboxProcsListsTheKernel(t *testing.T) {
	sandboxed(t)
	iso := newIso(t, nil)
	if iso.cg == nil {
		t.Skip("no cgroups on this host")
	}
	k, sb := startKernel(t, iso, "alice", DefaultProfile, Limits{})
	pids, err := sb.Procs()
	if err != nil || !slices.Contains(pids, k.Pid()) {
		t.Errorf("Procs of a running kernel: %v, %v; want its pid %d among them", pids, err, k.Pid())
	}
	endKernel(t, k)
	if _, err := sb.Release(); err != nil {
		t.Fatal(err)
	}
	if pids, err := sb.Procs(); pids != nil || err != nil {
		t.Errorf("Procs once released: %v, %v; want none", pids, err)
	}
}

// A group that cannot be removed is Release's error, never a clean
// release. Made so here on a hybrid host: a child cgroup in the group's
// dir on the cgroup2 mount, which Remove takes away with a plain rmdir.
func TestReleaseReportsAGroupNotRemoved(t *testing.T) {
	testenv.RequireRoot(t)
	iso := newIso(t, nil)
	if !strings.HasPrefix(iso.Report().CgroupMode, "hybrid") {
		t.Skipf("cgroup mode %q: the child cgroup only blocks the removal on a hybrid host", iso.Report().CgroupMode)
	}
	id := kernelID(t)
	sb, err := iso.reserve(id, "alice", DefaultProfile, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var child string
	for _, d := range groupDirs(iso, id) {
		var fs unix.Statfs_t
		if unix.Statfs(d, &fs) == nil && fs.Type == unix.CGROUP2_SUPER_MAGIC {
			child = filepath.Join(d, "stuck")
		}
	}
	if child == "" {
		t.Fatalf("no group dir of %v on the cgroup2 mount", groupDirs(iso, id))
	}
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the Isolator's Close
		_ = os.Remove(child)
		if err := sb.group.Remove(releaseTimeout); err != nil {
			t.Error(err)
		}
	})
	if _, err := sb.Release(); err == nil || !strings.Contains(err.Error(), "remove group") {
		t.Errorf("Release with the group dir kept: %v, want the removal's error", err)
	}
}
