package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/internal/testenv"
)

const testLock = ".kernpool.lock"

// holdLock takes the flock a live daemon holds on its state dir.
func holdLock(t *testing.T, stateDir string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(stateDir, testLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

func TestParentForIsPerStateDir(t *testing.T) {
	a, b := ParentFor("/run/kernpool/state"), ParentFor("/run/kernpool/state2")
	if a == b {
		t.Fatalf("two state dirs share the parent %s", a)
	}
	if !strings.HasPrefix(a, "kernpool-") || len(a) != len("kernpool-")+12 {
		t.Errorf("ParentFor = %q, want kernpool-<12 hex>", a)
	}
	if ParentFor("/run/kernpool/state/") != a || ParentFor("/run/kernpool/./state") != a {
		t.Errorf("the same dir spelled differently got another parent")
	}
}

// A parent whose owner's state-dir lock is held belongs to a running
// daemon: refused with ErrTaken naming that state dir, its group untouched.
func TestParentOfLiveDaemonIsRefused(t *testing.T) {
	testenv.RequireCgroupMode(t, DetectMode(""), ModeLegacy, ModeHybrid, ModeUnified)
	name := "/" + testParent(t)
	first := t.TempDir()
	holdLock(t, first)
	m, err := New(Config{Parent: name, Marker: first, StateDir: first, OwnerLock: testLock})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	g, err := m.NewGroup("k0123456789abcdef", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove(time.Second)
	second := t.TempDir()
	m2, err := New(Config{Parent: name, Marker: second, StateDir: second, OwnerLock: testLock})
	if err == nil {
		m2.Close()
		t.Fatal("a second pool took the parent of a running one")
	}
	if !errors.Is(err, ErrTaken) || !strings.Contains(err.Error(), first) {
		t.Fatalf("err = %v, want ErrTaken naming %s", err, first)
	}
	for _, d := range m.Info().Parents {
		if ok, _ := isMarked(d, first, first); !ok {
			t.Errorf("%s lost the first pool's marker", d)
		}
	}
}

// A parent marked by a state dir nobody holds the lock of is stale: a new
// pool adopts it, and its sweep kills the dead daemon's leftover kernel.
func TestStaleParentIsAdoptedAndSwept(t *testing.T) {
	testenv.RequireCgroupMode(t, DetectMode(""), ModeLegacy, ModeHybrid, ModeUnified)
	testenv.RequirePython(t)
	name := "/" + testParent(t)
	first := t.TempDir()
	m1, err := New(Config{Parent: name, Marker: first, StateDir: first, OwnerLock: testLock})
	if err != nil {
		t.Fatal(err)
	}
	left, err := m1.NewGroup("k00000000000000a1", nil)
	if err != nil {
		t.Fatal(err)
	}
	victim := startPlaced(t, left, "import time\ntime.sleep(300)\n")
	parents := m1.Info().Parents
	// The first daemon "crashed": no Close, and its lock is free.
	second := t.TempDir()
	m2, err := New(Config{Parent: name, Marker: second, StateDir: second, OwnerLock: testLock})
	if err != nil {
		t.Fatalf("stale parent not adopted: %v", err)
	}
	for _, d := range parents {
		if ok, _ := isMarked(d, second, second); !ok {
			t.Errorf("%s not marked by the adopting pool", d)
		}
	}
	if from := m2.Info().AdoptedFrom; len(from) != 1 || from[0] != first {
		t.Errorf("AdoptedFrom = %v, want [%s]", from, first)
	}
	res, err := m2.Sweep()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Groups) != 1 || res.Groups[0] != "k00000000000000a1" || res.Killed < 1 {
		t.Errorf("sweep = %+v, want the leftover group and its process", res)
	}
	_ = victim.Wait()
	if ws := victim.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() {
		t.Errorf("leftover kernel not killed: %v", victim.ProcessState)
	}
	if err := m2.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	for _, d := range parents {
		dirGone(t, d)
	}
}

// Limits reads back what the group's files hold, and zeros without limits.
func TestGroupLimitsReadBack(t *testing.T) {
	testenv.RequireCgroupMode(t, DetectMode(""), ModeLegacy, ModeHybrid, ModeUnified)
	m := newTestManager(t)
	mem, pids, quota, period := int64(64<<20), int64(16), int64(50000), uint64(100000)
	res := &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &mem, Swap: &mem},
		Pids:   &specs.LinuxPids{Limit: &pids},
		CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
	}
	g, err := m.NewGroup("k00000000000000b1", res)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove(time.Second)
	got, err := g.Limits()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Limits{MemoryMax: 64 << 20, PidsMax: 16, CPUMax: 0.5}); got != want {
		t.Errorf("Limits = %+v, want %+v", got, want)
	}
	free, err := m.NewGroup("k00000000000000b2", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer free.Remove(time.Second)
	if got, err := free.Limits(); err != nil || got != (Limits{}) {
		t.Errorf("unlimited group: Limits = %+v, %v, want zeros", got, err)
	}
}
