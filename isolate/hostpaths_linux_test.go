package isolate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// sandboxed skips unless kernels start through the init step here.
func sandboxed(t *testing.T) {
	t.Helper()
	testenv.RequireCgroupMode(t, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(t)
}

func endKernel(t *testing.T, k *kernel.Kernel) {
	t.Helper()
	_ = k.Kill()
	<-k.Done()
}

// jsonOut runs code (which prints one JSON value) and decodes it.
func jsonOut(t *testing.T, k *kernel.Kernel, code string, v any) {
	t.Helper()
	r := run(t, k, code)
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), v); err != nil {
		t.Fatalf("decode %q: %v", r.Stdout, err)
	}
}

// Every host directory a kernel uid could write is private to the kernel
// or read-only: what a kernel writes in any of them is not on the host
// while it runs, and nothing is left once it ends. The flood a tenant
// once parked in /run/lock stops at the private tmpfs's inode bound.
func TestNothingWrittenToHostPathsOutlivesTheKernel(t *testing.T) {
	sandboxed(t)
	iso := newIso(t, func(c *Config) {
		c.Profiles[DefaultProfile] = Profile{TmpSize: 4 << 20, Resources: c.Profiles[DefaultProfile].Resources}
	})
	hp := iso.hostPaths
	if len(hp.Private) == 0 || !contains(hp.Private, "/tmp") {
		t.Fatalf("host paths found: %+v; want /tmp among the private ones", hp)
	}
	taintedBefore := iso.TaintedUIDs() // uids other test processes use now
	k, sb := startKernel(t, iso, "alice", "default", Limits{})
	dirs := append(append([]string{}, hp.Private...), hp.ReadOnly...)
	dirs = append(dirs, "/run/lock", "/var/lock", "/dev/shm", "/var/tmp", "/tmp", "/dev/mqueue")
	list, _ := json.Marshal(dirs)
	name := "kernpool-left-" + sb.ID()
	t.Cleanup(func() { // what a broken sandbox (a mutant) left on the host
		for _, d := range dirs {
			_ = os.RemoveAll(filepath.Join(d, name))
			_ = os.RemoveAll(filepath.Join(d, "deep-"+sb.ID()))
			flood, _ := filepath.Glob(filepath.Join(d, "flood-"+sb.ID()+"-*"))
			for _, f := range flood {
				_ = os.Remove(f)
			}
		}
	})
	var wrote map[string]string
	jsonOut(t, k, fmt.Sprintf(`import json, os, errno
out = {}
for d in %s:
    try:
        with open(os.path.join(d, %q), "w") as f:
            f.write("x")
        out[d] = "wrote"
    except OSError as e:
        out[d] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))`, list, name), &wrote)
	for _, d := range hp.ReadOnly {
		if wrote[d] == "wrote" {
			t.Errorf("%s: the kernel wrote into a read-only host dir", d)
		}
	}
	var flood struct {
		N     int    `json:"n"`
		Errno string `json:"errno"`
		Depth int    `json:"depth"`
	}
	jsonOut(t, k, `import json, os, errno
d, n, err = "/run/lock" if os.path.isdir("/run/lock") else "/tmp", 0, ""
pre = "flood-" + os.environ["KERNPOOL_KERNEL_ID"] + "-"
try:
    while n < 200050:
        os.close(os.open("%s/%s%d" % (d, pre, n), os.O_CREAT | os.O_WRONLY, 0o600)); n += 1
except OSError as e:
    err = errno.errorcode.get(e.errno, str(e.errno))
for i in range(n):
    os.unlink("%s/%s%d" % (d, pre, i))
p = os.path.join(d, "deep-" + os.environ["KERNPOOL_KERNEL_ID"])
for depth in range(1, 41):
    os.mkdir(p)
    p = os.path.join(p, "deep")
print(json.dumps({"n": n, "errno": err, "depth": depth}))`, &flood)
	if flood.Errno != "ENOSPC" || flood.N > 1024 {
		t.Errorf("flood: %d files, then %q; want ENOSPC at the private tmpfs's %d inodes", flood.N, flood.Errno, 1024)
	}
	for _, d := range dirs {
		if _, err := os.Lstat(filepath.Join(d, name)); err == nil {
			t.Errorf("%s: the kernel's file is on the host while it runs", d)
		}
	}
	endKernel(t, k)
	for _, d := range dirs {
		if _, err := os.Lstat(filepath.Join(d, name)); err == nil {
			t.Errorf("%s: the kernel's file outlived it", d)
		}
		if _, err := os.Lstat(filepath.Join(d, "deep-"+sb.ID())); err == nil {
			t.Errorf("%s: a deep tree outlived the kernel", d)
		}
	}
	if n := iso.TaintedUIDs(); n > taintedBefore {
		t.Errorf("%d uids retired after the flood, %d before", n, taintedBefore)
	}
	next, _ := startKernel(t, iso, "bob", "default", Limits{})
	if r := run(t, next, "print(6*7)"); strings.TrimSpace(r.Stdout) != "42" {
		t.Errorf("the next owner's kernel: %q", r.Stdout)
	}
}

// TMPDIR (and the whole staging dir) is on the kernel's own tmpfs: a write
// beyond tmp_size fails with ENOSPC, and so does a file beyond its inodes.
func TestTmpdirIsCappedByTmpSize(t *testing.T) {
	sandboxed(t)
	iso := newIso(t, func(c *Config) {
		c.Profiles["small"] = Profile{TmpSize: 4 << 20, Resources: LimitsResources(Limits{MemoryMax: 256 << 20, PidsMax: 64})}
	})
	k, _ := startKernel(t, iso, "alice", "small", Limits{})
	var got struct {
		Tmpdir, Home, Bytes, Files string
		Wrote, Made                int
	}
	jsonOut(t, k, `import json, os, errno
t = os.environ["TMPDIR"]
res = {"Tmpdir": t, "Home": os.environ.get("HOME", "")}
try:
    with open(os.path.join(t, "big"), "wb") as f:
        for i in range(16):
            f.write(b"x" * (1 << 20)); f.flush(); res["Wrote"] = i + 1
    res["Bytes"] = "fit"
except OSError as e:
    res["Bytes"] = errno.errorcode.get(e.errno, str(e.errno))
os.unlink(os.path.join(t, "big"))
try:
    for i in range(100000):
        os.close(os.open(os.path.join(t, "f%d" % i), os.O_CREAT | os.O_WRONLY, 0o600)); res["Made"] = i + 1
    res["Files"] = "fit"
except OSError as e:
    res["Files"] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(res))`, &got)
	if got.Home != got.Tmpdir {
		t.Errorf("HOME = %q, want the capped TMPDIR %q", got.Home, got.Tmpdir)
	}
	if got.Bytes != "ENOSPC" || got.Wrote >= 4 {
		t.Errorf("16 MiB into %s with tmp_size 4 MiB: %d MiB, then %q; want ENOSPC before 4", got.Tmpdir, got.Wrote, got.Bytes)
	}
	if got.Files != "ENOSPC" || got.Made > 1024 {
		t.Errorf("100000 files into %s: %d, then %q; want ENOSPC by 1024", got.Tmpdir, got.Made, got.Files)
	}
}

func readInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("%s: %v", path, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// ioSetupNr is io_setup's syscall number here (the cell calls it through
// libc's syscall()); the test skips where it is not known.
func ioSetupNr(t *testing.T) string {
	t.Helper()
	nr, ok := map[string]string{"amd64": "206", "arm64": "0"}[runtime.GOARCH]
	if !ok {
		t.Skipf("io_setup's syscall number on %s is not known to this test", runtime.GOARCH)
	}
	return nr
}

// A kernel's ptys come from a devpts instance of its own, capped by
// pty_max: the host's kernel.pty.nr moves by at most that much. Linux AIO
// contexts (fs.aio-nr) are refused outright.
func TestPtysAndAIOAreBoundedPerKernel(t *testing.T) {
	sandboxed(t)
	const ptyMax = 8
	iso := newIso(t, func(c *Config) {
		c.Profiles[DefaultProfile] = Profile{PtyMax: ptyMax, Resources: c.Profiles[DefaultProfile].Resources}
	})
	ioSetup := ioSetupNr(t)
	k, _ := startKernel(t, iso, "alice", "default", Limits{})
	ptyBefore, aioBefore := readInt(t, "/proc/sys/kernel/pty/nr"), readInt(t, "/proc/sys/fs/aio-nr")
	var got struct {
		Opened int
		Errno  string
		AIO    string
		PtsNr  int
	}
	jsonOut(t, k, strings.ReplaceAll(`import ctypes, errno, json, os, pty
fds, err = [], ""
try:
    for _ in range(512):
        fds.extend(pty.openpty())
except OSError as e:
    err = errno.errorcode.get(e.errno, str(e))
libc = ctypes.CDLL(None, use_errno=True)
ctx = ctypes.c_ulong(0)
r = libc.syscall(IO_SETUP, 16384, ctypes.byref(ctx))
aio = "ok" if r == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
print(json.dumps({"Opened": len(fds) // 2, "Errno": err, "AIO": aio, "PtsNr": len([n for n in os.listdir("/dev/pts") if n != "ptmx"])}))`,
		"IO_SETUP", ioSetup), &got)
	ptyDuring, aioDuring := readInt(t, "/proc/sys/kernel/pty/nr"), readInt(t, "/proc/sys/fs/aio-nr")
	if got.Opened != ptyMax || got.Errno == "" {
		t.Errorf("opened %d ptys, then %q; want %d, then a refusal", got.Opened, got.Errno, ptyMax)
	}
	if d := ptyDuring - ptyBefore; d > ptyMax {
		t.Errorf("host pty.nr moved by %d (%d -> %d), want at most %d", d, ptyBefore, ptyDuring, ptyMax)
	}
	if got.AIO != "EPERM" {
		t.Errorf("io_setup(16384): %s, want EPERM", got.AIO)
	}
	if aioDuring > aioBefore {
		t.Errorf("host aio-nr moved %d -> %d", aioBefore, aioDuring)
	}
}

// With two kernels live, neither sees the other's id anywhere under /sys
// (its cgroup namespace shows its own group as the root) nor in its mount
// table or /proc/self/cgroup.
func TestNoOtherKernelVisibleUnderSys(t *testing.T) {
	sandboxed(t)
	iso := newIso(t, nil)
	// B first: A's mount namespace is a copy of the host's with B's
	// staging mount in it.
	_, sbB := startKernel(t, iso, "bob", "default", Limits{})
	a, _ := startKernel(t, iso, "alice", "default", Limits{})
	var hits []string
	jsonOut(t, a, fmt.Sprintf(`import json, os
needle, hits = %q, []
for root, dirs, files in os.walk("/sys", followlinks=False):
    for n in dirs + files:
        if needle in n:
            hits.append(os.path.join(root, n))
    if len(hits) > 20:
        break
for f in ("/proc/self/mountinfo", "/proc/self/cgroup"):
    if needle in open(f).read():
        hits.append(f)
for root, dirs, files in os.walk("/sys/fs/cgroup"):
    for n in files:
        if n in ("cgroup.procs", "tasks", "cgroup.subtree_control"):
            try:
                if needle in open(os.path.join(root, n)).read():
                    hits.append(os.path.join(root, n))
            except OSError:
                pass
print(json.dumps(hits))`, sbB.ID()), &hits)
	if len(hits) > 0 {
		t.Errorf("kernel B's id %s is visible to kernel A at %v", sbB.ID(), hits)
	}
}

// A request's cwd cannot hand the kernel a host dir to write: a cwd that
// is world-writable is bound back read-only, and a cwd that is a private
// dir itself (/tmp) is the kernel's private one.
func TestWorldWritableCwdIsNotTheHosts(t *testing.T) {
	sandboxed(t)
	iso := newIso(t, nil)
	shared := filepath.Join(stateDir(t), "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{shared, "/tmp"} {
		id := kernelID(t)
		sb, err := iso.reserve(id, "alice", "default", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		k, err := kernel.Start(context.Background(), kernel.Spec{
			ID: id, Interpreter: testenv.Python, StateDir: iso.cfg.StateDir, Cwd: cwd,
			Env: []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, Sandbox: sb,
		})
		if err != nil {
			t.Fatalf("cwd %s: %v", cwd, err)
		}
		name := "cwd-" + id
		t.Cleanup(func() { _ = os.Remove(filepath.Join(cwd, name)) })
		r := run(t, k, fmt.Sprintf("import os\ntry:\n    open(%q, 'w').write('x'); print('wrote', os.getcwd())\nexcept OSError as e:\n    print('refused', e.errno)", name))
		if _, err := os.Lstat(filepath.Join(cwd, name)); err == nil {
			t.Errorf("cwd %s: the kernel wrote into the host's dir (%s)", cwd, strings.TrimSpace(r.Stdout))
		}
		endKernel(t, k)
	}
}
