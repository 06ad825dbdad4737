package isolate

import (
	"errors"
	"slices"
	"strings"
	"testing"

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
