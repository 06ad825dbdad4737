package isolate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// procsOf lists the pids in the kernel's cgroup.
func procsOf(t testing.TB, sb *Sandbox) []int {
	t.Helper()
	pids, err := sb.group.Procs()
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

func TestOOMKilledKernelIsReportedAndNextKernelRuns(t *testing.T) {
	testenv.RequireCgroupMode(t, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(t)
	iso := newIso(t, nil)
	k, sb := startKernel(t, iso, "alice", "default", Limits{MemoryMax: 64 << 20})
	run(t, k, "x = 1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := k.Exec(ctx, kernel.Cell{Code: "b = bytearray(256 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"})
	var de *kernel.DeathError
	if !errors.As(err, &de) {
		t.Fatalf("Exec err = %v, want a *kernel.DeathError", err)
	}
	if !de.OOMKilled || de.MemoryLimit != 64<<20 {
		t.Fatalf("death = %+v, want OOMKilled at 64MiB", de)
	}
	if !strings.Contains(de.Error(), "64MiB") {
		t.Errorf("error %q does not name the limit", de.Error())
	}
	<-k.Done()
	if v := k.Verdict(); !v.OOMKilled {
		t.Errorf("verdict = %+v", v)
	}
	if n := iso.OOMKills(); n != 1 {
		t.Errorf("OOMKills = %d, want 1", n)
	}
	assertGone(t, iso, sb.id, nil)
	// The next kernel of the same owner starts fresh and works.
	k2, _ := startKernel(t, iso, "alice", "default", Limits{MemoryMax: 64 << 20})
	if r := run(t, k2, "print('x' in globals())"); strings.TrimSpace(r.Stdout) != "False" {
		t.Errorf("fresh kernel stdout = %q", r.Stdout)
	}
}

func TestForkBombIsContainedAndTornDown(t *testing.T) {
	testenv.RequireCgroupMode(t, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(t)
	iso := newIso(t, nil)
	k, sb := startKernel(t, iso, "mallory", "default", Limits{PidsMax: 64})
	run(t, k, `import os, time
if os.fork() == 0:
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.01)
`)
	// Wait (polling, no deadline asserted) until the bomb presses on its cap.
	var st kernel.Stats
	for i := 0; i < 3000; i++ {
		var err error
		if st, err = sb.Stats(); err != nil {
			t.Fatal(err)
		}
		if st.Pids >= 48 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st.Pids < 48 || st.Pids > 64 {
		t.Errorf("tasks in the group = %d, want the bomb pressing on, and capped at, 64", st.Pids)
	}
	pids := procsOf(t, sb)
	if err := k.Kill(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, iso, sb.id, pids)
	if left := procUIDs()[sb.UID()]; sb.UID() >= 0 && len(left) > 0 {
		t.Errorf("processes of uid %d left: %v", sb.UID(), left)
	}
}

// escapeCell leaves a setsid grandchild and a double-forked daemon behind.
const escapeCell = `import os, subprocess, time
subprocess.Popen(["sleep", "300"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.closerange(0, 3)
        time.sleep(300)
    os._exit(0)
time.sleep(0.2)
`

func TestEscapedDescendantsDieOnEveryTeardown(t *testing.T) {
	testenv.RequireCgroupMode(t, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(t)
	iso := newIso(t, nil)
	cases := []struct {
		name     string
		teardown func(t *testing.T, k *kernel.Kernel)
	}{
		{"kill (reset, owner shutdown, eviction)", func(t *testing.T, k *kernel.Kernel) {
			if err := k.Kill(); err != nil {
				t.Fatal(err)
			}
		}},
		{"timeout", func(t *testing.T, k *kernel.Kernel) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			if _, err := k.Exec(ctx, kernel.Cell{Code: "import time\ntime.sleep(60)", KillOnTimeout: true}); !errors.Is(err, kernel.ErrTimeout) {
				t.Fatalf("Exec = %v, want ErrTimeout", err)
			}
			<-k.Done()
		}},
		{"sys.exit", func(t *testing.T, k *kernel.Kernel) {
			_, _ = k.Exec(context.Background(), kernel.Cell{Code: "import sys\nsys.exit(3)"})
			<-k.Done()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, sb := startKernel(t, iso, "alice", "default", Limits{})
			run(t, k, escapeCell)
			pids := procsOf(t, sb)
			if len(pids) < 3 {
				t.Fatalf("group has %v, want the kernel, a setsid child and a daemon", pids)
			}
			c.teardown(t, k)
			assertGone(t, iso, sb.id, pids)
			if _, err := os.Stat(k.StagingDir()); !os.IsNotExist(err) {
				t.Errorf("staging dir remains: %v", err)
			}
		})
	}
}

// cgroupMountOf is the cgroup2 mount point holding path.
func cgroupMountOf(t *testing.T, path string) string {
	t.Helper()
	for _, m := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if strings.HasPrefix(path, m+"/") {
			return m
		}
	}
	t.Fatalf("%s is under no cgroup2 mount", path)
	return ""
}

func TestKernelStartsConfined(t *testing.T) {
	testenv.RequireCgroupMode(t, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(t)
	iso := newIso(t, nil)
	k, sb := startKernel(t, iso, "alice", "default", Limits{})
	if kf := sb.group.KillFile(); kf != "" {
		// The runner writes it when its host dies; in the kernel's cgroup
		// namespace its group is the root of the cgroup2 mount.
		inNS := filepath.Join(cgroupMountOf(t, kf), "cgroup.kill")
		if r := run(t, k, fmt.Sprintf("import os\nprint(os.access(%q, os.W_OK))", inNS)); strings.TrimSpace(r.Stdout) != "True" {
			diag := run(t, k, "import os\nprint(open('/proc/self/cgroup').read())\nprint([l for l in open('/proc/self/mountinfo') if 'cgroup' in l])\nprint(os.listdir('/sys/fs/cgroup')[:8])")
			t.Errorf("kernel cannot write its cgroup.kill %s (%s on the host): %s", inNS, kf, diag.Stdout)
		}
	}
	r := run(t, k, `import os, resource
print(os.getuid(), os.getgid(), os.getgroups())
print(resource.getrlimit(resource.RLIMIT_CORE), resource.getrlimit(resource.RLIMIT_NOFILE))
print([l for l in open("/proc/self/status") if l.startswith("NoNewPrivs")][0].split()[1])
print(os.getpgrp() == os.getpid())
print(open("/proc/self/cgroup").read().count("`+sb.id+`"))
print(sorted(k for k in os.environ if k.startswith(("KERNPOOL_CGROUP", "KERNPOOL_RLIMITS", "KERNPOOL_NO_NEW"))))
`)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	uid := sb.UID()
	if uid < 60000 || uid > 60999 {
		t.Fatalf("uid = %d, want one from 60000-60999", uid)
	}
	want := []string{
		fmt.Sprintf("%d %d []", uid, uid),
		"(0, 0) (1024, 1024)",
		"1",
		"True",
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d = %q, want %q", i, lines[i], w)
		}
	}
	// Its own cgroup namespace: it is in its groups (the host sees it
	// there), yet sees each as the root, never its id.
	if lines[4] != "0" {
		t.Errorf("the kernel sees its cgroup id %d times in /proc/self/cgroup, want 0 (a cgroup namespace of its own)", atoi(lines[4]))
	}
	if len(procsOf(t, sb)) < 1 {
		t.Errorf("kernel is in none of its groups, controllers %v", iso.Report().Controllers)
	}
	if lines[5] != "[]" {
		t.Errorf("runner variables visible to cells: %s", lines[5])
	}
	st, err := sb.Stats()
	if err != nil || st.MemoryCurrent <= 0 || st.Pids < 1 {
		t.Errorf("stats = %+v, %v", st, err)
	}
}

func TestOwnersAreSeparated(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePython(t)
	iso := newIso(t, nil)
	ka, sa := startKernel(t, iso, "alice", "default", Limits{})
	kb, sb := startKernel(t, iso, "bob", "default", Limits{})
	if sa.UID() == sb.UID() || sa.UID() < 0 || sb.UID() < 0 {
		t.Fatalf("uids %d and %d, want two distinct kernel uids", sa.UID(), sb.UID())
	}
	run(t, kb, "open('/tmp/x', 'w') if False else None\nimport os\nopen(os.environ['TMPDIR'] + '/secret', 'w').write('b')")
	r := run(t, ka, fmt.Sprintf(`import os, signal
def try_(f):
    try:
        f()
        return "ALLOWED"
    except (PermissionError, FileNotFoundError, ProcessLookupError):  # invisible under the init step
        return "denied"
print(try_(lambda: os.listdir(%[1]q)))
print(try_(lambda: open(%[1]q + "/tmp/secret").read()))
print(try_(lambda: os.kill(%[2]d, signal.SIGKILL)))
print(try_(lambda: open("/proc/%[3]d/environ").read()))
`, kb.StagingDir(), kb.Pid(), os.Getpid()))
	for i, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if line != "denied" {
			t.Errorf("check %d: %s (want denied)", i, line)
		}
	}
	run(t, kb, "pass") // b survived a's attempts
}

func TestNamespaces(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequirePython(t)
	code := "import os, socket\nprint(os.getpid() == 1, os.getppid() == 1, [n for _, n in socket.if_nameindex()])"
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		// The init is pid 1 and the interpreter's parent; only lo exists.
		{"init step", nil, "False True ['lo']"},
		// Without the init the interpreter is pid 1 itself.
		{"profile flags without the init step", func(c *Config) { c.InitStep = false }, "True False ['lo']"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			iso := newIso(t, func(cfg *Config) {
				cfg.Profiles["sealed"] = Profile{NoNetwork: true, PIDNamespace: true}
				if c.edit != nil {
					c.edit(cfg)
				}
			})
			k, _ := startKernel(t, iso, "alice", "sealed", Limits{})
			r := run(t, k, code)
			if got := strings.TrimSpace(r.Stdout); got != c.want {
				t.Errorf("sealed kernel sees %q, want %q", got, c.want)
			}
		})
	}
}
