//go:build integration && linux

package vmcheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/internal/testenv"
)

// The legacy-v1 half of vmcheck (integration/vm/run --cgroup v1): without
// kernpool code, the v1 facts kernpool relies on there.

// requireLegacyV1 skips unless /sys/fs/cgroup holds the v1 freezer, memory
// and pids hierarchies (a tmpfs of v1 mounts), and we are root with python3.
func requireLegacyV1(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequirePython(t)
	var st unix.Statfs_t
	if err := unix.Statfs(cgRoot, &st); err != nil || st.Type == unix.CGROUP2_SUPER_MAGIC {
		t.Skip("needs cgroup v1: /sys/fs/cgroup is unified cgroup v2 here; integration/vm/run --cgroup v1 provides v1")
	}
	for _, c := range []string{"freezer", "memory", "pids"} {
		if err := unix.Statfs(filepath.Join(cgRoot, c), &st); err != nil || st.Type != unix.CGROUP_SUPER_MAGIC {
			t.Skipf("needs the v1 %s hierarchy at %s/%s", c, cgRoot, c)
		}
	}
}

// v1Group makes a marked group in each named v1 hierarchy with the given
// limits ("memory.limit_in_bytes": "64M") and removes it at cleanup after
// SIGKILLing what is left (thawed first).
func v1Group(t *testing.T, name string, limits map[string]string, ctrls ...string) map[string]string {
	t.Helper()
	dirs := map[string]string{}
	for _, c := range ctrls {
		d := filepath.Join(cgRoot, c, fmt.Sprintf("%s-%d-%s", marker, os.Getpid(), name))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs[c] = d
	}
	t.Cleanup(func() {
		if f := dirs["freezer"]; f != "" {
			_ = os.WriteFile(filepath.Join(f, "freezer.state"), []byte("THAWED"), 0o644)
		}
		for _, d := range dirs {
			killAll(d)
		}
		for _, d := range dirs {
			removeTree(t, d)
		}
	})
	for k, v := range limits {
		c := strings.SplitN(k, ".", 2)[0]
		write(t, filepath.Join(dirs[c], k), v)
	}
	return dirs
}

// killAll SIGKILLs the members of dir until it is empty (bounded).
func killAll(dir string) {
	for i := 0; i < 200 && procsOf(dir) != ""; i++ {
		for _, p := range strings.Split(procsOf(dir), ",") {
			if pid, err := strconv.Atoi(p); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// spawnV1 starts python, which writes 0 into each group's cgroup.procs
// before running code (v1 has no clone into a group; kernpool's kernel
// places itself the same way).
func spawnV1(t *testing.T, dirs map[string]string, code string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	var place strings.Builder
	for _, d := range dirs {
		fmt.Fprintf(&place, "open(%q, 'w').write('0')\n", filepath.Join(d, "cgroup.procs"))
	}
	var out bytes.Buffer
	cmd := exec.Command(testenv.Python, "-c", place.String()+code)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Children hold the output pipe: kill them all before Wait.
		for _, d := range dirs {
			killAll(d)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, &out
}

func waitProcs(t *testing.T, dir string, atLeast int) {
	t.Helper()
	deadline := time.Now().Add(6 * waitFor)
	for len(strings.Split(procsOf(dir), ",")) < atLeast || procsOf(dir) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("want >= %d processes in %s, have %q", atLeast, dir, procsOf(dir))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestV1MemoryOOMVerdict: a hog at memory.limit_in_bytes is OOM-killed and
// memory.oom_control's oom_kill counter says so (kernpool's v1 verdict).
func TestV1MemoryOOMVerdict(t *testing.T) {
	requireLegacyV1(t)
	g := v1Group(t, "oom", map[string]string{"memory.limit_in_bytes": "64M"}, "memory")
	cmd, out := spawnV1(t, g, "b = b'x' * (512 << 20)\nprint('survived')")
	err := cmd.Wait()
	if err == nil || strings.Contains(out.String(), "survived") {
		t.Fatalf("hog survived a 64M cap: err=%v out=%s", err, out)
	}
	if n := keyed(t, filepath.Join(g["memory"], "memory.oom_control"), "oom_kill"); n < 1 {
		t.Fatalf("memory.oom_control oom_kill=%d after the hog died (%v); want >= 1", n, err)
	}
}

// TestV1PidsCap: a fork burst under pids.max hits the cap (pids.events).
func TestV1PidsCap(t *testing.T) {
	requireLegacyV1(t)
	g := v1Group(t, "pids", map[string]string{"pids.max": "16"}, "pids")
	_, out := spawnV1(t, g, `
import os, time
for i in range(6):
    try:
        os.fork()
    except OSError:
        pass
time.sleep(300)
`)
	deadline := time.Now().Add(6 * waitFor)
	for keyed(t, filepath.Join(g["pids"], "pids.events"), "max") < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("pids.events max=0: 64 forks under a cap of 16 never hit it (out %q)", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if cur, _ := strconv.Atoi(read(t, filepath.Join(g["pids"], "pids.current"))); cur > 16 || cur < 2 {
		t.Fatalf("pids.current=%d with pids.max=16", cur)
	}
}

// TestV1FreezerTreeKill: freeze, SIGKILL every member, thaw empties a group
// holding a fork bomb under a pids cap and setsid'd grandchildren: frozen
// members cannot fork, so the listed pids are the whole tree.
func TestV1FreezerTreeKill(t *testing.T) {
	requireLegacyV1(t)
	g := v1Group(t, "kill", map[string]string{"pids.max": "32"}, "freezer", "pids")
	spawnV1(t, g, `
import os, time, subprocess
subprocess.Popen(['/bin/sleep', '300'], start_new_session=True)
while True:
    try:
        if os.fork() == 0:
            os.setsid()
    except OSError:
        time.sleep(0.01)
`)
	waitProcs(t, g["pids"], 16)
	state := filepath.Join(g["freezer"], "freezer.state")
	write(t, state, "FROZEN")
	deadline := time.Now().Add(waitFor)
	for read(t, state) != "FROZEN" {
		if time.Now().After(deadline) {
			t.Fatalf("freezer.state %q after %v", read(t, state), waitFor)
		}
		time.Sleep(time.Millisecond)
	}
	for _, p := range strings.Split(procsOf(g["freezer"]), ",") {
		pid, _ := strconv.Atoi(p)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	write(t, state, "THAWED")
	deadline = time.Now().Add(waitFor)
	for procsOf(g["freezer"]) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("one freeze-kill-thaw pass left %q", procsOf(g["freezer"]))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestV1StaticKeyStorm is the kernpool-free reproducer of the v1 guest
// freeze (a livelock in the first churn test), run only on request with KERNPOOL_VMCHECK_STORM, a
// comma list of:
//
//   - freezer: toggle an empty v1 freezer group FROZEN/THAWED. On Linux
//     >= 6.1 each toggle switches the freezer_active static key, i.e.
//     rewrites kernel text at every freezing() site (int3 patching and
//     cross-CPU syncs; under TCG every rewritten page's translations are
//     thrown away);
//   - freezer-pinned: the same while a second, empty group stays FROZEN,
//     so the key stays on and no text is rewritten (kernpool's fix);
//   - schedstats: toggle kernel.sched_schedstats, another static key, no
//     cgroup at all.
//
// Go threads (SIGURG preemption) pass through get_signal meanwhile. The
// freezer round needs the VM's own pin off (KERNPOOL_VM_FREEZER_PIN=0). It logs
// the time per toggle and passes when the guest survives
// KERNPOOL_VMCHECK_STORM_N (50) toggles of each.
func TestV1StaticKeyStorm(t *testing.T) {
	kinds := os.Getenv("KERNPOOL_VMCHECK_STORM")
	if kinds == "" {
		t.Skip("reproducer: set KERNPOOL_VMCHECK_STORM=freezer,freezer-pinned,schedstats")
	}
	testenv.RequireRoot(t)
	n, _ := strconv.Atoi(os.Getenv("KERNPOOL_VMCHECK_STORM_N"))
	if n == 0 {
		n = 50
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_ = syscall.Getppid()
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	for round, kind := range strings.Split(kinds, ",") {
		stormRound(t, round, kind, n)
	}
}

// stormRound toggles one kind n times and logs the time per toggle.
func stormRound(t *testing.T, round int, kind string, n int) {
	var file, on, off string
	switch kind {
	case "freezer", "freezer-pinned":
		requireLegacyV1(t)
		if pin := os.Getenv("KERNPOOL_VM_FREEZER_PINNED"); kind == "freezer" && pin != "" {
			t.Skipf("freezer storm: the VM keeps the freezer key on (%s FROZEN), so no toggle switches it; run with KERNPOOL_VM_FREEZER_PIN=0", pin)
		}
		g := v1Group(t, fmt.Sprintf("%s-%d", kind, round), nil, "freezer")
		file, on, off = filepath.Join(g["freezer"], "freezer.state"), "FROZEN", "THAWED"
		if kind == "freezer-pinned" {
			pin := v1Group(t, fmt.Sprintf("%s-%d-pin", kind, round), nil, "freezer")
			pinState := filepath.Join(pin["freezer"], "freezer.state")
			write(t, pinState, "FROZEN")
			// Unpin at the end of the round: the next one starts with the key off.
			defer write(t, pinState, "THAWED")
		}
	case "schedstats":
		if os.Getenv("KERNPOOL_IN_VM") != "1" {
			t.Skip("schedstats storm: a host-wide sysctl, only inside integration/vm/run (KERNPOOL_IN_VM=1)")
		}
		file, on, off = "/proc/sys/kernel/sched_schedstats", "1", "0"
		t.Cleanup(func() { _ = os.WriteFile(file, []byte("0"), 0o644) })
	default:
		t.Fatalf("KERNPOOL_VMCHECK_STORM: %q is none of freezer, freezer-pinned, schedstats", kind)
	}
	start := time.Now()
	for i := 1; i <= n; i++ {
		write(t, file, on)
		write(t, file, off)
		if i%10 == 0 {
			fmt.Printf("storm %s: %d toggles in %v\n", kind, i, time.Since(start).Round(time.Millisecond))
		}
	}
	el := time.Since(start)
	t.Logf("storm %s: %d on/off toggles in %v (%v per toggle)", kind, n, el.Round(time.Millisecond), (el / time.Duration(n)).Round(time.Microsecond))
}
