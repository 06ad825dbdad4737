//go:build integration && linux

package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// cgroupFile reads a limit file of kernel id's cgroup, whichever hierarchy
// has it ("" when none does): the report must match what the kernel has.
func cgroupFile(id string, names ...string) string {
	for _, dir := range findCgroups(map[string]bool{id: true}) {
		for _, n := range names {
			if b, err := os.ReadFile(filepath.Join(dir, n)); err == nil {
				return strings.TrimSpace(string(b))
			}
		}
	}
	return ""
}

// Every result says what was enforced, and it is true: the uid the kernel
// runs as, the limits its cgroup really has, its network; ps (table and
// JSON) shows the same.
func TestIsolationReportIsTrue(t *testing.T) {
	requireDaemon(t)
	d := StartDaemon(t, Opts{MemoryMax: "64MiB", PidsMax: 64, CPUMax: "0.5",
		Config: "profile \"open\" {\n  network = true\n}\n"})
	r := d.Run(t, "alice", "import os\nprint(os.getuid())")
	is := r.Kernel.Isolation
	if is == nil {
		t.Fatalf("result has no kernel.isolation: %+v", r)
	}
	if is.Mode != "sandbox" || strconv.Itoa(is.UID) != strings.TrimSpace(r.Output) || is.UID < 60000 || is.UID > 60999 {
		t.Errorf("isolation %+v, kernel runs as uid %s", *is, r.Output)
	}
	// The default profile has no host network: its own network namespace.
	if is.MemoryMax != 64<<20 || is.PidsMax != 64 || is.CPUMax != 0.5 || is.Network || !slices.Contains(is.Namespaces, "net") {
		t.Errorf("isolation %+v, want 64MiB, 64 pids, 0.5 cpu, no network, a net namespace", *is)
	}
	mem := cgroupFile(r.Kernel.ID, "memory.max", "memory.limit_in_bytes")
	pids := cgroupFile(r.Kernel.ID, "pids.max")
	if mem != strconv.FormatInt(is.MemoryMax, 10) || pids != strconv.FormatInt(is.PidsMax, 10) {
		t.Errorf("the kernel's cgroup has memory %q pids %q; the report says %d, %d", mem, pids, is.MemoryMax, is.PidsMax)
	}
	s := d.RunReq(t, ExecReq{Owner: "alice", Mode: "open", Code: "1"})
	if si := s.Kernel.Isolation; si == nil || !si.Network || slices.Contains(si.Namespaces, "net") {
		t.Errorf("open mode isolation = %+v, want the host network and no net namespace", si)
	}
	_, stderr, code := d.CLI(context.Background(), "", "exec", "--mode", "nope", "1")
	if code == 0 || !strings.Contains(stderr, `mode "nope" is not configured; known modes: default, open`) {
		t.Errorf("exec --mode nope: exit %d, stderr %q: want the known modes", code, stderr)
	}
	out, _, code := d.CLI(context.Background(), "", "ps", "--json")
	var list struct {
		Kernels []KernelInfo `json:"kernels"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("ps --json: %d %s", code, out)
	}
	for _, k := range list.Kernels {
		if k.ID == r.Kernel.ID && (k.Isolation == nil || fmt.Sprint(*k.Isolation) != fmt.Sprint(*is)) {
			t.Errorf("ps --json isolation %+v, result %+v", k.Isolation, *is)
		}
	}
	table, _, _ := d.CLI(context.Background(), "", "ps")
	want := fmt.Sprintf("sandbox uid=%d mem=64MiB pids=64 cpu=0.5", is.UID)
	if !strings.Contains(table, "ISOLATION") || !strings.Contains(table, want) {
		t.Errorf("ps table lacks %q:\n%s", want, table)
	}
	doctor, _, _ := d.CLI(context.Background(), "", "doctor", "--state-dir", d.State)
	if !strings.Contains(doctor, "kernel "+r.Kernel.ID) || !strings.Contains(doctor, want) || !strings.Contains(doctor, "isolation:    sandbox") {
		t.Errorf("doctor does not show the kernel's isolation %q:\n%s", want, doctor)
	}
}

// After a restart the first kernel does not get the uid the last kernel
// before the restart had: the least recently used order is persisted.
func TestUIDOrderSurvivesRestart(t *testing.T) {
	requireDaemon(t)
	d := StartDaemon(t, Opts{})
	first := d.Run(t, "alice", "1").Kernel.Isolation
	d.Stop()
	d.Restart(Opts{})
	again := d.Run(t, "alice", "1").Kernel.Isolation
	if first == nil || again == nil || first.UID == again.UID {
		t.Fatalf("uid before the restart %+v, after %+v: want another uid", first, again)
	}
}

// leftoverCell leaves files of its uid in every world-writable dir of the
// host and a SysV shared memory segment, and prints the segment id.
const leftoverCell = `
import ctypes, os
tag = %q
for d in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock"):
    with open(os.path.join(d, tag), "w") as f: f.write("secret of the previous tenant")
os.makedirs("/tmp/%%s.d/inner" %% tag)
open("/tmp/%%s.d/inner/x" %% tag, "w").close()
libc = ctypes.CDLL(None, use_errno=True)
print(libc.shmget(0, 4096, 0o1000 | 0o600))
`

// A tenant given a recycled uid finds nothing the previous tenant of that
// uid left: files in the host's world-writable dirs, SysV IPC.
func TestRecycledUIDFindsNothingOfThePreviousTenant(t *testing.T) {
	requireDaemon(t)
	const uid = 61990 // a one-uid range: the second kernel must get it again
	d := StartDaemon(t, Opts{Config: fmt.Sprintf("users {\n  uid_range = \"%d-%d\"\n}\n", uid, uid)})
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	tag := "kp-leftover-" + hex.EncodeToString(b)
	paths := []string{"/tmp/" + tag, "/var/tmp/" + tag, "/dev/shm/" + tag, "/run/lock/" + tag, "/tmp/" + tag + ".d"}
	t.Cleanup(func() {
		for _, p := range paths {
			os.RemoveAll(p)
		}
	})
	r1 := d.Run(t, "alice", fmt.Sprintf(leftoverCell, tag))
	shmid := strings.TrimSpace(r1.Output)
	if r1.Kernel.Isolation == nil || r1.Kernel.Isolation.UID != uid || shmid == "-1" {
		t.Fatalf("first tenant: %+v", r1)
	}
	if err := d.API().Shutdown(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	list, _ := json.Marshal(paths) // a valid Python list literal
	check := fmt.Sprintf("import os\nprint([p for p in %s if os.path.lexists(p)], any(l.split()[1] == %q for l in open('/proc/sysvipc/shm').readlines()[1:]))", list, shmid)
	r2 := d.Run(t, "bob", check)
	if r2.Kernel.Isolation == nil || r2.Kernel.Isolation.UID != uid {
		t.Fatalf("second tenant did not get uid %d again: %+v", uid, r2.Kernel.Isolation)
	}
	if got := strings.TrimSpace(r2.Output); got != "[] False" {
		t.Errorf("the second tenant of uid %d found the first one's leftovers: %s", uid, got)
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s survived on the host", p)
		}
	}
	if b, _ := os.ReadFile("/proc/sysvipc/shm"); strings.Contains(" "+string(b), " "+shmid+" ") && hasUID(string(b), uid) {
		t.Errorf("shm segment %s of uid %d survived", shmid, uid)
	}
}

// hasUID reports whether a /proc/sysvipc table has a line owned by uid.
func hasUID(table string, uid int) bool {
	lines := strings.Split(table, "\n")
	if len(lines) == 0 {
		return false
	}
	col := -1
	for i, h := range strings.Fields(lines[0]) {
		if h == "uid" {
			col = i
		}
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); col >= 0 && len(f) > col && f[col] == strconv.Itoa(uid) {
			return true
		}
	}
	return false
}

// docs/kernpool.example.hcl starts as shipped, and runs a cell in each of
// its modes with the isolation it promises.
func TestExampleConfigStarts(t *testing.T) {
	requireDaemon(t)
	example, err := filepath.Abs("../docs/kernpool.example.hcl")
	if err != nil {
		t.Fatal(err)
	}
	d := StartDaemon(t, Opts{ConfigFile: example})
	r := d.Run(t, "alice", "print(6*7)")
	if strings.TrimSpace(r.Output) != "42" || r.Kernel.Isolation == nil || r.Kernel.Isolation.MemoryMax != 512<<20 {
		t.Errorf("default mode: %+v", r)
	}
	// The kernel's parent is its init, pid 1 of its own pid namespace.
	u := d.RunReq(t, ExecReq{Owner: "alice", Mode: "untrusted", Code: "import os\nprint(os.getppid())"})
	is := u.Kernel.Isolation
	if is == nil || is.MemoryMax != 128<<20 || is.PidsMax != 32 || is.Network || !slices.Contains(is.Namespaces, "pid") || strings.TrimSpace(u.Output) != "1" {
		t.Errorf("untrusted mode: output %q isolation %+v", u.Output, is)
	}
}
