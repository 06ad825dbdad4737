//go:build integration && linux

package vmcheck

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSpawnIntoCgroup: the child is in the group from its first instruction.
func TestSpawnIntoCgroup(t *testing.T) {
	requireUnifiedV2(t, "clone3 CLONE_INTO_CGROUP takes a v2 group (v1 groups are joined through cgroup.procs, as the TestV1* tests do)")
	g := newGroup(t, pool(t), "k-spawn", nil)
	cmd, out := spawnInto(t, g, "print(open('/proc/self/cgroup').read().strip())")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("python: %v: %s", err, out)
	}
	if !strings.HasSuffix(strings.TrimSpace(out.String()), "/k-spawn") {
		t.Fatalf("child's cgroup is %q, want .../k-spawn", out)
	}
}

// TestMemoryOOMVerdict: a hog at memory.max is OOM-killed and memory.events
// says so (the verdict kernpool reports, never guessed from SIGKILL).
func TestMemoryOOMVerdict(t *testing.T) {
	requireUnifiedV2(t, "memory.events is v2 (TestV1MemoryOOMVerdict reads memory.oom_control)")
	g := newGroup(t, pool(t), "k-oom", map[string]string{"memory.max": "64M", "memory.swap.max": "0"})
	cmd, out := spawnInto(t, g, "b = b'x' * (512 << 20)\nprint('survived')")
	err := cmd.Wait()
	if err == nil || strings.Contains(out.String(), "survived") {
		t.Fatalf("hog survived a 64M cap: err=%v out=%s", err, out)
	}
	if n := keyed(t, filepath.Join(g, "memory.events"), "oom_kill"); n < 1 {
		t.Fatalf("memory.events oom_kill=%d after the hog died (%v); want >= 1", n, err)
	}
}

// TestPidsCap: a bounded fork burst never exceeds pids.max, and forks fail.
func TestPidsCap(t *testing.T) {
	requireUnifiedV2(t, "checks the v2 pids.events and cgroup.kill (TestV1PidsCap covers v1)")
	g := newGroup(t, pool(t), "k-pids", map[string]string{"pids.max": "16"})
	code := `
import os, time
root = os.getpid(); failed = 0
for i in range(6):
    try:
        if os.fork() == 0:
            continue
    except OSError:
        failed += 1
if os.getpid() != root:
    time.sleep(30); os._exit(0)
print("failed", failed, flush=True)
time.sleep(30)
`
	_, out := spawnInto(t, g, code)
	// 64 forks under a cap of 16 must hit it; under emulation on a busy
	// host the burst can take a while, so wait for the event, not a time.
	deadline := time.Now().Add(6 * waitFor)
	for keyed(t, filepath.Join(g, "pids.events"), "max") < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("pids.events max=0 after %v: 64 forks under a cap of 16 never hit it (out %q)", 6*waitFor, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cur, _ := strconv.Atoi(read(t, filepath.Join(g, "pids.current")))
	if cur > 16 || cur < 2 {
		t.Fatalf("pids.current=%d with pids.max=16 (out %q)", cur, out)
	}
	write(t, filepath.Join(g, "cgroup.kill"), "1")
	waitEmpty(t, g)
}

// TestTreeKill: cgroup.kill takes setsid'd, double-forked grandchildren that
// a process-group kill would miss.
func TestTreeKill(t *testing.T) {
	requireUnifiedV2(t, "cgroup.kill is v2 (TestV1FreezerTreeKill covers the v1 freezer kill)")
	g := newGroup(t, pool(t), "k-kill", nil)
	code := `
import os, subprocess, time, signal
subprocess.Popen(['/bin/sleep', '300'], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(300)
    os._exit(0)
print("ready", flush=True)
time.sleep(300)
`
	_, out := spawnInto(t, g, code)
	deadline := time.Now().Add(waitFor)
	for time.Now().Before(deadline) && len(strings.Split(procsOf(g), ",")) < 3 {
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(strings.Split(procsOf(g), ",")); n < 3 {
		t.Fatalf("want >= 3 processes in the group before the kill, have %q (out %q)", procsOf(g), out)
	}
	write(t, filepath.Join(g, "cgroup.kill"), "1")
	waitEmpty(t, g)
}

// TestDelegationLayout: a group holding processes cannot enable controllers
// for children (no internal processes), which is why kernpool must move
// itself into a leaf before making kernel groups.
func TestDelegationLayout(t *testing.T) {
	requireUnifiedV2(t, "the no-internal-process rule exists only in v2")
	parent := pool(t)
	busy := newGroup(t, parent, "k-busy", nil)
	cmd, _ := spawnInto(t, busy, "import time; time.sleep(30)")
	err := writeErr(filepath.Join(busy, "cgroup.subtree_control"), "+memory")
	if err == nil {
		t.Fatal("enabling +memory in a populated group succeeded; cgroup v2 forbids internal processes")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if got := read(t, filepath.Join(parent, "cgroup.subtree_control")); !strings.Contains(got, "memory") {
		t.Fatalf("pool parent subtree_control=%q, want memory enabled", got)
	}
}

func waitEmpty(t *testing.T, g string) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for time.Now().Before(deadline) {
		if keyed(t, filepath.Join(g, "cgroup.events"), "populated") == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("group %s still populated after cgroup.kill: pids %s", g, procsOf(g))
}
