package cgroup

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/kernpool/kernpool/internal/testenv"
)

func limits(mem, pids int64) *specs.LinuxResources {
	return &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &mem, Swap: &mem},
		Pids:   &specs.LinuxPids{Limit: &pids},
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	testenv.RequireCgroupMode(t, DetectMode(""), ModeLegacy, ModeHybrid, ModeUnified)
	state := t.TempDir()
	cases := []struct {
		name string
		cfg  Config
	}{
		{"no marker", Config{StateDir: state}},
		{"no state", Config{Marker: state}},
		{"root parent", Config{Parent: "/", Marker: state, StateDir: state}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if m, err := New(c.cfg); err == nil {
				m.Close()
				t.Fatal("New accepted a bad config")
			}
		})
	}
}

func TestNewGroupRejectsBadName(t *testing.T) {
	testenv.RequireCgroupMode(t, DetectMode(""), ModeLegacy, ModeHybrid, ModeUnified)
	m := newTestManager(t)
	for _, name := range []string{"", "../x", "k123", "kXXXXXXXXXXXXXXXX", "k0123456789abcdef/x"} {
		if _, err := m.NewGroup(name, nil); !errors.Is(err, ErrInvalidName) {
			t.Errorf("NewGroup(%q) = %v, want ErrInvalidName", name, err)
		}
	}
}

func TestForeignParentIsRefusedAndUntouched(t *testing.T) {
	testenv.RequireCgroupMode(t, DetectMode(""), ModeLegacy, ModeHybrid, ModeUnified)
	name := testParent(t)
	var dir string
	if DetectMode("") == ModeUnified {
		dir = filepath.Join(DefaultMount, name)
	} else {
		dir = filepath.Join(DefaultMount, "pids", name)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dir)
	state := t.TempDir()
	m, err := New(Config{Parent: "/" + name, Marker: state, StateDir: state})
	if err == nil {
		m.Close()
		t.Fatal("New used an unmarked existing parent")
	}
	if !errors.Is(err, ErrForeign) {
		t.Fatalf("err = %v, want ErrForeign", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("foreign group touched: %v", err)
	}
}

func TestKillTreeAndRemove(t *testing.T) {
	testenv.RequireCgroupMode(t, DetectMode(""), ModeLegacy, ModeHybrid, ModeUnified)
	testenv.RequirePython(t)
	m := newTestManager(t)
	g, err := m.NewGroup("k00000000000000a1", limits(256<<20, 64))
	if err != nil {
		t.Fatal(err)
	}
	// setsid grandchildren and a double-forked daemon escape killpg, not the group.
	cmd := startPlaced(t, g, `import os, subprocess, time
subprocess.Popen(["sleep", "300"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(300)
    os._exit(0)
time.sleep(300)
`)
	var pids []int
	for i := 0; i < 200 && len(pids) < 3; i++ {
		pids, _ = g.Procs()
		time.Sleep(5 * time.Millisecond)
	}
	if len(pids) < 3 {
		t.Fatalf("group has %d procs, want >= 3", len(pids))
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if err := g.Remove(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !waitGone(pid) {
			t.Errorf("pid %d survived the group kill", pid)
		}
	}
	for _, d := range g.b.(interface{ placementFiles() []string }).placementFiles() {
		dirGone(t, filepath.Dir(d))
	}
	if kf := g.KillFile(); kf != "" {
		dirGone(t, filepath.Dir(kf))
	}
	if err := g.Remove(time.Second); err != nil {
		t.Errorf("second Remove: %v", err)
	}
	if err := g.Kill(); err != nil {
		t.Errorf("Kill after Remove: %v", err)
	}
}

func TestOOMVerdictAndStats(t *testing.T) {
	testenv.RequireCgroupMode(t, DetectMode(""), ModeLegacy, ModeHybrid, ModeUnified)
	testenv.RequirePython(t)
	m := newTestManager(t)
	const limit = 64 << 20
	g, err := m.NewGroup("k00000000000000b2", limits(limit, 64))
	if err != nil {
		t.Fatal(err)
	}
	if g.MemoryLimit() != limit {
		t.Fatalf("MemoryLimit = %d", g.MemoryLimit())
	}
	cmd := startPlaced(t, g, `import sys
sys.stdin.readline()
b = bytearray(256 << 20)
for i in range(0, len(b), 4096): b[i] = 1
print("survived", flush=True)
`)
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.MemoryCurrent <= 0 || st.Pids < 1 || st.MemoryPeak < st.MemoryCurrent {
		t.Errorf("stats = %+v", st)
	}
	if oom, err := g.OOMKilled(); err != nil || oom {
		t.Fatalf("OOM before allocating: %v %v", oom, err)
	}
	_ = cmd.Wait() // stdin is /dev/null: readline returns, the cell allocates
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL by the OOM killer", cmd.ProcessState)
	}
	oom, err := g.OOMKilled()
	if err != nil || !oom {
		t.Fatalf("OOMKilled = %v, %v; want true", oom, err)
	}
	if st, err = g.Stats(); err != nil || st.CPUTime <= 0 || st.MemoryPeak < limit/2 || st.Pids != 0 {
		t.Errorf("stats after the OOM kill = %+v, %v", st, err)
	}
	if err := g.Remove(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestNoOOMVerdictForPlainSIGKILL(t *testing.T) {
	testenv.RequireCgroupMode(t, DetectMode(""), ModeLegacy, ModeHybrid, ModeUnified)
	testenv.RequirePython(t)
	m := newTestManager(t)
	g, err := m.NewGroup("k00000000000000b3", limits(64<<20, 64))
	if err != nil {
		t.Fatal(err)
	}
	cmd := startPlaced(t, g, "import time\ntime.sleep(300)\n")
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if oom, err := g.OOMKilled(); err != nil || oom {
		t.Fatalf("OOMKilled = %v, %v after a plain SIGKILL", oom, err)
	}
}

// TestSweepKillsMarkedLeftoversOnly: a new Manager over the same parent and
// marker sweeps a leftover kernel group with a live process, and leaves a
// foreign sibling group and a foreign child group with live processes alone.
func TestSweepKillsMarkedLeftoversOnly(t *testing.T) {
	testenv.RequireCgroupMode(t, DetectMode(""), ModeLegacy, ModeHybrid, ModeUnified)
	testenv.RequirePython(t)
	state := t.TempDir()
	cfg := Config{Parent: testParent(t), Marker: state, StateDir: state}
	m1, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	left, err := m1.NewGroup("k00000000000000c4", limits(128<<20, 32))
	if err != nil {
		t.Fatal(err)
	}
	victim := startPlaced(t, left, "import time\ntime.sleep(300)\n")
	// Foreign groups: one beside the parent, one inside it with a non-kernel name.
	parentDir := m1.Info().Parents[0]
	foreignDirs := []string{parentDir + "-foreign", filepath.Join(parentDir, "someone-else")}
	var foreignPids []int
	for _, d := range foreignDirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(d)
		c := exec.Command("sleep", "300")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(c.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
		foreignPids = append(foreignPids, c.Process.Pid)
	}
	// A second instance (the first "crashed": no Close) sweeps.
	m2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m2.Sweep()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Groups) != 1 || res.Groups[0] != "k00000000000000c4" || res.Killed < 1 {
		t.Errorf("sweep = %+v", res)
	}
	_ = victim.Wait()
	if ws := victim.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() {
		t.Errorf("leftover kernel not killed: %v", victim.ProcessState)
	}
	for i, d := range foreignDirs {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("foreign group %s removed", d)
		}
		if !alive(foreignPids[i]) || !inProcs(d, foreignPids[i]) {
			t.Errorf("foreign process %d in %s touched", foreignPids[i], d)
		}
		// Move it back out so cleanup can remove the dirs.
		_ = os.WriteFile(filepath.Join(filepath.Dir(parentDir), "cgroup.procs"), []byte(strconv.Itoa(foreignPids[i])), 0)
	}
	os.Remove(foreignDirs[1])
	if err := m2.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	_ = m1.Close()
	dirGone(t, parentDir)
}

func inProcs(dir string, pid int) bool {
	f, err := os.Open(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == strconv.Itoa(pid) {
			return true
		}
	}
	return false
}

// A second daemon with its own state dir must not adopt (and sweep) the
// parent of a running one; the refusal names the owner's state dir.
func TestParentOfAnotherPoolIsRefusedByName(t *testing.T) {
	testenv.RequireCgroupMode(t, DetectMode(""), ModeLegacy, ModeHybrid, ModeUnified)
	name := testParent(t)
	first := t.TempDir()
	m, err := New(Config{Parent: "/" + name, Marker: first, StateDir: first})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer m.Close()
	g, err := m.NewGroup("k0123456789abcdef", nil)
	if err != nil {
		t.Fatalf("NewGroup: %v", err)
	}
	defer g.Remove(time.Second)
	second := t.TempDir()
	m2, err := New(Config{Parent: "/" + name, Marker: second, StateDir: second})
	if err == nil {
		m2.Close()
		t.Fatal("a second pool adopted a live pool's parent")
	}
	if !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), first) {
		t.Fatalf("err = %v, want ErrForeign naming %s", err, first)
	}
	if _, err := g.Procs(); err != nil {
		t.Fatalf("the first pool's group was touched: %v", err)
	}
}
