package isolate

import (
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// TestDropNamespaces: a daemon that is not root cannot give kernels a
// network or pid namespace: each profile asking for one is named in Lost
// (sandbox mode then refuses to start) and loses the flags, so reports
// say what kernels get; profiles asking for none are untouched.
func TestDropNamespaces(t *testing.T) {
	i := bareIsolator(t)
	i.cfg.Profiles = map[string]Profile{"a": {NoNetwork: true}, "b": {}, "c": {PIDNamespace: true, TmpSize: 1 << 20}}
	i.dropNamespaces([]string{"a", "b", "c"})
	if len(i.report.Lost) != 2 || !strings.Contains(i.report.Lost[0], "(profile a;") || !strings.Contains(i.report.Lost[1], "(profile c;") {
		t.Errorf("Lost %q, want one line for profile a and one for c", i.report.Lost)
	}
	if len(i.report.Advice) != 1 {
		t.Errorf("Advice %q, want one line (run as root)", i.report.Advice)
	}
	for n, p := range i.cfg.Profiles {
		if p.NoNetwork || p.PIDNamespace {
			t.Errorf("profile %s still asks for namespaces: %+v", n, p)
		}
	}
	if len(i.cfg.Profiles) != 3 || i.cfg.Profiles["c"].TmpSize != 1<<20 {
		t.Errorf("profiles after the drop: %+v", i.cfg.Profiles)
	}
}

// TestCgroupsDisabledLosses: without cgroups, kernels with a uid of their
// own are still killed whole (by uid); only kernels of the daemon's uid
// lose the kill of descendants that leave the process group.
func TestCgroupsDisabledLosses(t *testing.T) {
	testenv.RequireRoot(t)
	for _, c := range []struct {
		name      string
		runAs     bool
		wantsLost bool
	}{
		{"uids of their own", true, false},
		{"the daemon's uid", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			iso := newIso(t, func(cfg *Config) {
				cfg.CgroupEnabled, cfg.Isolation, cfg.RunAsUser, cfg.PerOwnerUID = false, kernel.IsolationProcess, c.runAs, false
				cfg.UIDRange = [2]int{62770, 62779}
			})
			lost := strings.Join(iso.Report().Lost, "\n")
			if got := strings.Contains(lost, "killing descendants that leave the process group"); got != c.wantsLost {
				t.Errorf("Lost names the descendants' kill: %t, want %t\n%s", got, c.wantsLost, lost)
			}
		})
	}
}

// TestContains: the controller check finds a listed controller and only
// a listed one.
func TestContains(t *testing.T) {
	for _, c := range []struct {
		list []string
		s    string
		want bool
	}{
		{[]string{"cpu", "memory"}, "memory", true},
		{[]string{"cpu"}, "memory", false},
		{nil, "pids", false},
	} {
		if got := contains(c.list, c.s); got != c.want {
			t.Errorf("contains(%q, %q) = %t, want %t", c.list, c.s, got, c.want)
		}
	}
}

// TestCgroupAdvice: a cgroup setup that fails for no known reason is
// advised by who the daemon is: a root daemon needs a writable cgroupfs,
// another one root or a delegated subtree.
func TestCgroupAdvice(t *testing.T) {
	want := "run the daemon as root"
	if os.Geteuid() == 0 {
		want = "mount cgroupfs writable"
	}
	if got := cgroupAdvice(errors.New("permission denied")); !strings.HasPrefix(got, want) {
		t.Errorf("cgroupAdvice = %q, want it to start %q", got, want)
	}
}

// TestPrepareDirectEnv: a kernel started without the init step gets the
// runner's variables for what it must do itself: v1 placement only with
// files to join, rlimits only when there are some, no_new_privs when set.
func TestPrepareDirectEnv(t *testing.T) {
	for _, c := range []struct {
		name      string
		placement []string
		rlimits   []Rlimit
		want      []string
	}{
		{"nothing to do", nil, nil, []string{kernel.EnvNoNewPrivs + "=1"}},
		{"placement and rlimits", []string{"/a", "/b"}, []Rlimit{{Name: "core"}},
			[]string{kernel.EnvCgroupProcs + "=/a:/b", kernel.EnvRlimits + "=core=0:0", kernel.EnvNoNewPrivs + "=1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			iso := bareIsolator(t)
			iso.cfg.Rlimits, iso.cfg.NoNewPrivs = c.rlimits, true
			s := &Sandbox{iso: iso, uid: -1, gid: -1}
			var a syscall.SysProcAttr
			var env []string
			s.prepareDirect(&a, &env, c.placement)
			if !slices.Equal(env, c.want) {
				t.Errorf("env %q, want %q", env, c.want)
			}
		})
	}
}
