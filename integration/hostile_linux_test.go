//go:build integration && linux

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// procKiB reads a kB figure (VmRSS:, VmHWM:) of /proc/<pid>/status.
func procKiB(t *testing.T, pid int, name string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", name, pid)
	return 0
}

// daemonPeakGrowth resets the daemon's peak RSS, runs attack while another
// owner keeps running cells, and returns the daemon's peak RSS growth in
// bytes; it fails the test when the other owner was not served.
func daemonPeakGrowth(t *testing.T, d *Daemon, attack func()) int64 {
	t.Helper()
	d.Run(t, "bystander", "n = 0")
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", d.Pid()), []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the daemon's peak RSS: %v", err)
	}
	before := procKiB(t, d.Pid(), "VmRSS:")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	served, failed := 0, 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), scaled(time.Minute))
			res, err := d.API().Execute(ctx, ExecReq{Owner: "bystander", Code: "n += 1"})
			cancel()
			if err != nil || res.Status != "success" {
				failed++
			} else {
				served++
			}
		}
	})
	attack()
	growth := (procKiB(t, d.Pid(), "VmHWM:") - before) << 10
	close(stop)
	wg.Wait()
	t.Logf("daemon peak RSS growth %.1f MiB; bystander served %d cells, %d failed", float64(growth)/(1<<20), served, failed)
	if served == 0 || failed > 0 {
		t.Errorf("the daemon did not keep serving another owner: %d served, %d failed", served, failed)
	}
	if growth > 32<<20 {
		t.Errorf("daemon peak RSS grew by %d bytes during the attack (bound 32 MiB)", growth)
	}
	return growth
}

// A sandboxed cell finds its sentinel and forges a 60 MB reply frame: the
// daemon refuses it from the header, kills the kernel, says so, stays
// small, and serves other owners throughout.
func TestHostileForgedFrameDaemon(t *testing.T) {
	requireDaemon(t)
	d := StartDaemon(t, capped())
	var res Result
	daemonPeakGrowth(t, d, func() {
		res = d.Run(t, "attacker", `import os, sys
f, sent = sys._getframe(), None
while f is not None and sent is None:
    sent = getattr(f.f_locals.get("self"), "sentinel", None)
    f = f.f_back
os.write(1, b"\n" + sent + b" 60000000\n")
for _ in range(60):
    os.write(1, b"x" * (1 << 20))`)
	})
	if res.Status != "error" || !strings.Contains(res.Error, "broke the wire protocol") || !strings.Contains(res.Error, "60000000 bytes exceeds") {
		t.Fatalf("result %+v, want a protocol error naming the oversized frame", res)
	}
	assertServes(t, d, "attacker")
	shutdownAndCheck(t, d, "attacker", "bystander")
}

// A sandboxed kernel reads its spill at the path the result names (its own
// uid, the spill dir's group) but cannot write or replace it; kernpool
// spill serves it; it goes with its kernel.
func TestHostileSpillDaemon(t *testing.T) {
	requireDaemon(t)
	d := StartDaemon(t, capped())
	first := d.Run(t, "s", "print('a' * 60000)")
	if first.StdoutSpillPath == "" || !strings.HasPrefix(first.StdoutSpillPath, filepath.Join(d.State, "spill", first.Kernel.ID)+"/") {
		t.Fatalf("spill path %q is not in the daemon's spill dir; warning %q", first.StdoutSpillPath, first.Warning)
	}
	probe := d.Run(t, "s", fmt.Sprintf(`import os
p = %q
print(len(open(p).read()))
try:
    open(p, "a")
    print("writable")
except OSError as e:
    print(type(e).__name__)
try:
    os.rename(os.path.dirname(p), os.path.dirname(p) + ".x")
    print("swapped")
except OSError as e:
    print(type(e).__name__)`, first.StdoutSpillPath))
	if probe.Output != "60001\nPermissionError\nPermissionError\n" {
		t.Fatalf("the kernel's view of its spill: %q (error %q)", probe.Output, probe.Error)
	}
	ctx, cancel := context.WithTimeout(context.Background(), scaled(time.Minute))
	defer cancel()
	out, errOut, rc := d.CLI(ctx, "", "spill", first.Kernel.ID, filepath.Base(first.StdoutSpillPath))
	if rc != 0 || out != strings.Repeat("a", 60000)+"\n" {
		t.Fatalf("kernpool spill: exit %d, %d bytes, stderr %q", rc, len(out), errOut)
	}
	shutdownAndCheck(t, d, "s")
	if _, err := os.Stat(filepath.Join(d.State, "spill", first.Kernel.ID)); !os.IsNotExist(err) {
		t.Fatalf("the spill dir survived its kernel: %v", err)
	}
}
