//go:build integration && linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The escape suite's host-path and host-pool cases: one daemon with a
// three-uid range, a small tmp_size and pty_max, attacked in turn.
const (
	v3UIDFirst, v3UIDLast = 61710, 61712
	v3PtyMax              = 8
)

// floodAndDeepTree is the attack that once retired every uid: 200,050
// files in /run/lock and a deep tree in each world-writable dir.
const floodAndDeepTree = `
import json, os, errno
d = "/run/lock" if os.path.isdir("/run/lock") else "/tmp"
pre = "flood-" + os.environ["KERNPOOL_KERNEL_ID"] + "-"
n, err = 0, ""
try:
    while n < 200050:
        os.close(os.open("%s/%s%d" % (d, pre, n), os.O_CREAT | os.O_WRONLY, 0o600)); n += 1
except OSError as e:
    err = errno.errorcode.get(e.errno, str(e.errno))
for i in range(n):
    os.unlink("%s/%s%d" % (d, pre, i))
for top in (d, "/var/tmp", "/tmp", "/dev/shm"):
    p = os.path.join(top, "deep-" + os.environ["KERNPOOL_KERNEL_ID"])
    for i in range(12):
        os.makedirs(p, exist_ok=True)
        p = os.path.join(p, "deep")
print(json.dumps({"n": n, "errno": err}))
`

// writeEverywhere writes a marker into every directory the kernel can
// write that it finds under / (pseudo filesystems aside) and reports them.
const writeEverywhere = `
import json, os
marker = "kernpool-escape-" + os.environ["KERNPOOL_KERNEL_ID"]
wrote = []
for root, dirs, files in os.walk("/", topdown=True):
    if root in ("/proc", "/sys"):
        dirs[:] = []
        continue
    if os.access(root, os.W_OK | os.X_OK):
        try:
            with open(os.path.join(root, marker), "w") as f:
                f.write("x")
            wrote.append(root)
        except OSError:
            pass
print(json.dumps({"marker": marker, "wrote": wrote}))
`

const tmpdirFill = `
import json, os, errno
t, res = os.environ["TMPDIR"], {}
try:
    with open(os.path.join(t, "big"), "wb") as f:
        for i in range(32):
            f.write(b"x" * (1 << 20)); f.flush()
    res["bytes"] = "fit"
except OSError as e:
    res["bytes"] = errno.errorcode.get(e.errno, str(e.errno))
os.unlink(os.path.join(t, "big"))
n = 0
try:
    while n < 100000:
        os.close(os.open(os.path.join(t, "f%d" % n), os.O_CREAT | os.O_WRONLY, 0o600)); n += 1
    res["files"] = "fit"
except OSError as e:
    res["files"] = errno.errorcode.get(e.errno, str(e.errno))
res["n"] = n
print(json.dumps(res))
`

const ptysAndAIO = `
import ctypes, errno, json, os, pty
fds = []
try:
    for _ in range(512):
        fds.extend(pty.openpty())
except OSError:
    pass
libc = ctypes.CDLL(None, use_errno=True)
ctx = ctypes.c_ulong(0)
r = libc.syscall(IO_SETUP, 16384, ctypes.byref(ctx))  # io_setup
aio = "ok" if r == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
print(json.dumps({"ptys": len(fds) // 2, "aio": aio}))
`

// findOthers looks for another kernel's id under /sys (names, and the
// cgroup membership files) and in the kernel's mount table and cgroups.
const findOthers = `
import json, os
needle, hits = %q, []
for root, dirs, files in os.walk("/sys"):
    for n in dirs + files:
        if needle in n:
            hits.append(os.path.join(root, n))
    for n in files:
        if root.startswith("/sys/fs/cgroup") and n in ("cgroup.procs", "tasks"):
            try:
                if needle in open(os.path.join(root, n)).read():
                    hits.append(os.path.join(root, n))
            except OSError:
                pass
    if len(hits) > 20:
        break
for f in ("/proc/self/mountinfo", "/proc/self/cgroup"):
    if needle in open(f).read():
        hits.append(f)
print(json.dumps(hits))
`

func decodeOutput(t *testing.T, res Result, v any) {
	t.Helper()
	if res.Status != "success" {
		t.Fatalf("attack cell: status %q error %q output %.300q", res.Status, res.Error, res.Output)
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.Output)), v); err != nil {
		t.Fatalf("attack output %.300q: %v", res.Output, err)
	}
}

func hostInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("%s: %v", path, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// rangeEntries lists entries in dir owned by a uid of the test's range.
func rangeEntries(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		var st syscall.Stat_t
		if syscall.Lstat(filepath.Join(dir, e.Name()), &st) == nil && st.Uid >= v3UIDFirst && st.Uid <= v3UIDLast {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestHostPathEscapes: nothing a tenant writes outlives its kernel or
// touches a host-wide pool, and no tenant can make a uid unusable.
func TestHostPathEscapes(t *testing.T) {
	requireDaemon(t)
	d := StartDaemon(t, Opts{MemoryMax: "256MiB", PidsMax: 64, MaxKernels: 4, Config: fmt.Sprintf(
		"users {\n  uid_range = \"%d-%d\"\n}\nprofile \"default\" {\n  memory_max = \"256MiB\"\n  tmp_size = \"8MiB\"\n  pty_max = %d\n}\n",
		v3UIDFirst, v3UIDLast, v3PtyMax)})
	run := func(owner, code string) Result {
		return d.RunReq(t, ExecReq{Owner: owner, Code: code, Timeout: "120s"})
	}
	t.Run("scrub_flood_and_deep_tree", func(t *testing.T) {
		var got struct {
			N     int    `json:"n"`
			Errno string `json:"errno"`
		}
		decodeOutput(t, run("flooder", floodAndDeepTree), &got)
		if got.Errno != "ENOSPC" || got.N > 2048 {
			t.Errorf("flood: %d files, then %q; want ENOSPC at the private tmpfs's inode bound", got.N, got.Errno)
		}
		shutdownAndCheck(t, d, "flooder")
		for _, dir := range []string{"/run/lock", "/var/tmp", "/tmp", "/dev/shm"} {
			if left := rangeEntries(dir); len(left) > 0 {
				t.Errorf("%s: kernel uids' entries outlived the kernel: %v", dir, left)
			}
		}
		// Every uid of the range is still leasable: one kernel per owner.
		owners := []string{"next-1", "next-2", "next-3"}
		for _, o := range owners {
			if res := run(o, "print(6*7)"); strings.TrimSpace(res.Output) != "42" {
				t.Errorf("owner %s after the flood: status %q error %q", o, res.Status, res.Error)
			}
		}
		shutdownAndCheck(t, d, owners...)
	})
	t.Run("host_paths_private", func(t *testing.T) {
		var got struct {
			Marker string   `json:"marker"`
			Wrote  []string `json:"wrote"`
		}
		decodeOutput(t, run("writer", writeEverywhere), &got)
		if len(got.Wrote) == 0 {
			t.Fatal("the kernel could write nowhere: the test proves nothing")
		}
		check := func(when string) {
			for _, dir := range got.Wrote {
				if _, err := os.Lstat(filepath.Join(dir, got.Marker)); err == nil {
					t.Errorf("%s: the kernel's file is on the host %s", dir, when)
				}
			}
		}
		check("while the kernel runs")
		shutdownAndCheck(t, d, "writer")
		check("after the kernel ended")
		t.Logf("the kernel wrote into %d dirs, none of them the host's: %v", len(got.Wrote), got.Wrote)
	})
	t.Run("tmpdir_enospc", func(t *testing.T) {
		var got struct {
			Bytes, Files string
			N            int
		}
		decodeOutput(t, run("filler", tmpdirFill), &got)
		if got.Bytes != "ENOSPC" || got.Files != "ENOSPC" || got.N > 2048 {
			t.Errorf("TMPDIR with tmp_size 8MiB: 32 MiB -> %q, files -> %q after %d; want ENOSPC for both", got.Bytes, got.Files, got.N)
		}
		shutdownAndCheck(t, d, "filler")
	})
	t.Run("pty_and_aio_bounded", func(t *testing.T) {
		nr, ok := map[string]string{"amd64": "206", "arm64": "0"}[runtime.GOARCH] // io_setup
		if !ok {
			t.Skipf("io_setup's syscall number on %s is not known to this test", runtime.GOARCH)
		}
		ptyBefore, aioBefore := hostInt(t, "/proc/sys/kernel/pty/nr"), hostInt(t, "/proc/sys/fs/aio-nr")
		var got struct {
			Ptys int    `json:"ptys"`
			AIO  string `json:"aio"`
		}
		decodeOutput(t, run("ptys", strings.ReplaceAll(ptysAndAIO, "IO_SETUP", nr)), &got)
		ptyDuring, aioDuring := hostInt(t, "/proc/sys/kernel/pty/nr"), hostInt(t, "/proc/sys/fs/aio-nr")
		if got.Ptys != v3PtyMax || ptyDuring-ptyBefore > v3PtyMax {
			t.Errorf("the kernel holds %d ptys; host pty.nr %d -> %d; want %d at most", got.Ptys, ptyBefore, ptyDuring, v3PtyMax)
		}
		if got.AIO != "EPERM" || aioDuring > aioBefore {
			t.Errorf("io_setup(16384): %s; host aio-nr %d -> %d", got.AIO, aioBefore, aioDuring)
		}
		shutdownAndCheck(t, d, "ptys")
	})
	t.Run("no_other_kernel_under_sys", func(t *testing.T) {
		other := d.Run(t, "bystander", "x = 1")
		var hits []string
		decodeOutput(t, run("looker", fmt.Sprintf(findOthers, other.Kernel.ID)), &hits)
		if len(hits) > 0 {
			t.Errorf("kernel %s is visible to another tenant at %v", other.Kernel.ID, hits)
		}
		shutdownAndCheck(t, d, "bystander", "looker")
	})
}
