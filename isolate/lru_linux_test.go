package isolate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// The least recently used free uid is leased; the order lives in the lock
// dir, so a new pool (a restarted daemon) continues it.
func TestUIDLeastRecentlyUsedAcrossPools(t *testing.T) {
	dir := t.TempDir()
	p := newUIDPool(100, 102, false, dir, nil)
	a, _ := p.acquire("x")
	p.release(a)
	b, _ := p.acquire("x")
	p.release(b)
	if a != 100 || b != 101 {
		t.Fatalf("leases %d, %d; want 100 then 101 (the freed uid rests)", a, b)
	}
	restarted := newUIDPool(100, 102, false, dir, nil)
	c, _ := restarted.acquire("x")
	if c != 102 {
		t.Fatalf("after a restart: uid %d, want 102, the one never used", c)
	}
	restarted.release(c)
	again := newUIDPool(100, 102, false, dir, nil)
	if d, _ := again.acquire("x"); d != 100 {
		t.Fatalf("after another restart: uid %d, want 100, the least recently used", d)
	}
}

// scrubUID removes what the uid owns in world-writable dirs, whole
// directories included, and nothing else: not other uids' files, not the
// target of a symlink it planted.
func TestScrubRemovesOnlyTheUIDsFiles(t *testing.T) {
	testenv.RequireRoot(t)
	const uid, other = 61991, 61992
	root := t.TempDir()
	ww := filepath.Join(root, "tmp")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{ww, outside} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(d, 0o1777)
	}
	victim := filepath.Join(outside, "victim") // owned by uid, but not in a scrubbed dir
	mk := func(p string, owner int, dir bool) {
		t.Helper()
		var err error
		if dir {
			err = os.Mkdir(p, 0o777)
		} else {
			err = os.WriteFile(p, []byte("x"), 0o644)
		}
		if err == nil {
			err = os.Lchown(p, owner, owner)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	mk(victim, uid, false)
	mk(filepath.Join(ww, "mine"), uid, false)
	mk(filepath.Join(ww, "mydir"), uid, true)
	mk(filepath.Join(ww, "mydir", "deep"), other, false) // in uid's dir: goes with it
	mk(filepath.Join(ww, "shared"), other, true)
	_ = os.Chmod(filepath.Join(ww, "shared"), 0o777)
	mk(filepath.Join(ww, "shared", "mine-too"), uid, false)
	mk(filepath.Join(ww, "theirs"), other, false)
	if err := os.Symlink(outside, filepath.Join(ww, "link")); err != nil {
		t.Fatal(err)
	}
	_ = os.Lchown(filepath.Join(ww, "link"), uid, uid)
	if _, err := scrubUID([]string{ww, filepath.Join(root, "missing")}, uid); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"mine", "mydir", "shared/mine-too", "link"} {
		if _, err := os.Lstat(filepath.Join(ww, gone)); !os.IsNotExist(err) {
			t.Errorf("%s survived the scrub", gone)
		}
	}
	for _, kept := range []string{filepath.Join(ww, "theirs"), filepath.Join(ww, "shared"), victim} {
		if _, err := os.Lstat(kept); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
}

// A sandbox reports the limits its cgroup really has, the kernel's uid,
// its profile's network, and the init step's namespaces and seccomp.
func TestSandboxIsolationMatchesTheCgroup(t *testing.T) {
	testenv.RequireCgroupMode(t, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	iso := newIso(t, func(c *Config) {
		c.Profiles["sealed"] = Profile{NoNetwork: true, Resources: LimitsResources(Limits{MemoryMax: 96 << 20, PidsMax: 40, CPUMax: 0.25})}
	})
	sb, err := iso.reserve(kernelID(t), "alice", "sealed", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Release()
	is := sb.Isolation()
	want := kernel.Isolation{Mode: kernel.IsolationSandbox, UID: sb.UID(), Namespaces: []string{"ipc", "mnt", "net", "pid", "uts"}, Seccomp: true,
		MemoryMax: 96 << 20, PidsMax: 40, CPUMax: 0.25}
	if is.Mode != want.Mode || is.UID != want.UID || is.UID < 60000 || is.Network || strings.Join(is.Namespaces, ",") != "ipc,mnt,net,pid,uts" || !is.Seccomp ||
		is.MemoryMax != want.MemoryMax || is.PidsMax != want.PidsMax || is.CPUMax != want.CPUMax {
		t.Errorf("isolation = %+v, want %+v", is, want)
	}
	for _, d := range groupDirs(iso, sb.ID()) {
		if b, err := os.ReadFile(filepath.Join(d, "memory.limit_in_bytes")); err == nil && strings.TrimSpace(string(b)) != "100663296" {
			t.Errorf("%s: memory.limit_in_bytes = %s, report says %d", d, b, is.MemoryMax)
		}
	}
	if _, err := iso.reserve(kernelID(t), "alice", "nope", Limits{}); err == nil || !strings.Contains(err.Error(), "known: default, sealed") {
		t.Errorf("unknown mode: %v, want a refusal naming the modes", err)
	}
}

// In process mode without a cgroup or a uid of its own, a kernel is only
// its process group: Kill returns once no member of the group runs (the
// one process-group sandbox waits), and the report says so.
func TestProcessModeKillWaitsForTheGroup(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePython(t)
	// Without the init step too: a kernel that is nothing but its group.
	iso := newIso(t, func(c *Config) {
		c.CgroupEnabled, c.RunAsUser, c.Isolation, c.InitStep = false, false, kernel.IsolationProcess, false
	})
	if a := iso.Report().Allows(); !strings.Contains(a, "own uid 0") || !strings.Contains(a, "signal and kill each other") {
		t.Errorf("Allows() = %q", a)
	}
	k, sb := startKernel(t, iso, "alice", "default", Limits{})
	r := run(t, k, "import subprocess\nps = [subprocess.Popen(['sleep', '300']) for _ in range(4)]\nprint(*[p.pid for p in ps])")
	if is := sb.Isolation(); is.Mode != kernel.IsolationProcess || is.UID != 0 || is.MemoryMax != 0 || len(is.Namespaces) != 0 {
		t.Errorf("isolation = %+v", is)
	}
	if err := k.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(r.Stdout) {
		if pid := atoi(f); alive(pid) {
			t.Errorf("group member %d still runs after Kill returned", pid)
		}
	}
}
