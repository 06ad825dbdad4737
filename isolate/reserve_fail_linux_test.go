package isolate

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/internal/testenv"
)

// TestReserveFailureFreesUIDAndGroup: a reserve that fails after taking
// the kernel's uid (its cgroup cannot be made) or its cgroup too (the
// group cannot enforce a limit: fail closed) gives both back: the range's
// only uid is leased again at once, and no group dir is left. Ranges
// 62880-62881.
func TestReserveFailureFreesUIDAndGroup(t *testing.T) {
	testenv.RequireRoot(t)
	for _, c := range []struct {
		name    string
		uid     int
		id      string
		profile Limits // the default profile's limits
		wantErr error
	}{
		// Not a kernel id: NewGroup refuses it after the uid was taken.
		{"no cgroup", 62880, "not-a-kernel", Limits{MemoryMax: 1 << 30}, cgroup.ErrInvalidName},
		// v1 reads a 4 EiB memory limit back as none: fillIsolation fails
		// (v2 enforces it: skipped).
		{"a limit the group does not enforce", 62881, kernelID(t), Limits{MemoryMax: 1 << 62}, ErrIsolation},
	} {
		t.Run(c.name, func(t *testing.T) {
			iso := newIso(t, func(cfg *Config) {
				cfg.UIDRange = [2]int{c.uid, c.uid}
				cfg.Profiles = map[string]Profile{DefaultProfile: {Resources: LimitsResources(c.profile)}}
			})
			if iso.cg == nil {
				t.Skip("no cgroups on this host")
			}
			t.Cleanup(func() { // what a broken reserve left, before Close
				for _, d := range groupDirs(iso, c.id) {
					_ = os.Remove(d)
				}
			})
			sb, err := iso.reserve(c.id, "alice", DefaultProfile, Limits{})
			if err == nil {
				_, _ = sb.Release()
				t.Skipf("this host's cgroup took the request (%s)", iso.Report().CgroupMode)
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("reserve: %v, want %v", err, c.wantErr)
			}
			for _, d := range groupDirs(iso, c.id) {
				if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the failed reserve left group dir %s (%v)", d, err)
				}
			}
			sb, err = iso.reserve(kernelID(t), "bob", DefaultProfile, Limits{MemoryMax: 1 << 30})
			if err != nil {
				t.Fatalf("the range's only uid after a failed reserve: %v", err)
			}
			if sb.UID() != c.uid {
				t.Errorf("uid %d, want %d", sb.UID(), c.uid)
			}
			_, _ = sb.Release()
		})
	}
}

// TestSweptGroupStagingDir: New sweeps a previous instance's kernel group
// and removes that kernel's staging dir, saying an error only when the
// removal failed (a dir made immutable with chattr +i cannot be emptied).
func TestSweptGroupStagingDir(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("no chattr")
	}
	for _, c := range []struct {
		name      string
		first     int
		immutable bool
	}{
		{"removable", 62882, false},
		{"immutable", 62884, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig(stateDir(t))
			cfg.CgroupParent, cfg.UIDRange = testParent(t), [2]int{c.first, c.first + 1}
			prev, err := New(cfg)
			mustOK(t, err)
			if prev.cg == nil {
				t.Skip("no cgroups on this host")
			}
			id := kernelID(t)
			sb, err := prev.reserve(id, "alice", DefaultProfile, Limits{})
			mustOK(t, err)
			t.Cleanup(func() { _, _ = sb.Release() }) // frees its uid's lock; the group is swept
			_ = prev.Close()                          // fails (busy parent): its group stays, the instance "died"
			staging := filepath.Join(cfg.StateDir, "kernels", id)
			mustOK(t, os.MkdirAll(filepath.Join(staging, "tmp"), 0o700))
			if c.immutable {
				if out, err := exec.Command("chattr", "+i", staging).CombinedOutput(); err != nil {
					t.Skipf("chattr +i: %v %s", err, out)
				}
				t.Cleanup(func() { _ = exec.Command("chattr", "-i", staging).Run() })
			}
			var logs logBuffer
			iso := newIso(t, func(c *Config) {
				*c = cfg
				c.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
			})
			if n := iso.Report().Swept; n != 1 {
				t.Fatalf("swept %d groups, want 1", n)
			}
			_, statErr := os.Stat(staging)
			logged := strings.Contains(logs.String(), "cannot remove a leftover staging dir")
			if logged != c.immutable || errors.Is(statErr, os.ErrNotExist) == c.immutable {
				t.Fatalf("staging dir: stat after New: %v; error logged: %t (want %t)\n%s", statErr, logged, c.immutable, logs.String())
			}
		})
	}
}
