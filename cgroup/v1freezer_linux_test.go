package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/kernpool/kernpool/internal/testenv"
)

// freezerOnly makes m's v1 pool kill through the freezer, as on a pure
// legacy host (a hybrid host like the development machines kills through
// cgroup.kill on its cgroup2 mount instead): it drops the cgroup2 parent this
// pool created and pins the freezer as New does on a legacy host.
func freezerOnly(t *testing.T, m *Manager) *v1Pool {
	t.Helper()
	p, ok := m.b.(*v1Pool)
	if !ok || !p.has("freezer") {
		t.Skip("needs the v1 freezer hierarchy")
	}
	if p.udir != "" {
		for i, d := range p.dirs {
			if d == p.udir {
				p.dirs = append(p.dirs[:i:i], p.dirs[i+1:]...)
				break
			}
		}
		for _, d := range p.created {
			if d == p.udir {
				_ = os.Remove(d)
			}
		}
		p.udir = ""
		p.pinFreezer(hclog.NewNullLogger())
	}
	return p
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestV1FreezerKillIsPinnedAndTotal: on a legacy host the pool keeps one
// empty freezer group FROZEN for its life (so no kill switches the kernel's
// freezer static key, the issue-15 livelock), and the freeze-kill-thaw
// sequence still takes a whole fork bomb under the pids cap, setsid'd
// children included, without the pin ever holding a task or thawing.
func TestV1FreezerKillIsPinnedAndTotal(t *testing.T) {
	testenv.RequireCgroupMode(t, DetectMode(""), ModeLegacy, ModeHybrid)
	testenv.RequirePython(t)
	var pin string
	t.Cleanup(func() { // runs after newTestManager's Close
		if pin != "" {
			if _, err := os.Stat(pin); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("pinned freezer group %s outlived Close (err %v)", pin, err)
			}
		}
	})
	m := newTestManager(t)
	p := freezerOnly(t, m)
	pin = p.pin
	if pin == "" {
		t.Fatal("no pinned freezer group on a freezer-killing v1 pool")
	}
	if s := readTrim(t, filepath.Join(pin, "freezer.state")); s != "FROZEN" {
		t.Fatalf("pinned group state %q, want FROZEN", s)
	}
	if kernelName.MatchString(filepath.Base(pin)) {
		t.Fatalf("pin %s has a kernel id's shape: a sweep would remove it", pin)
	}
	g, err := m.NewGroup("k00000000000000b1", limits(256<<20, 32))
	if err != nil {
		t.Fatal(err)
	}
	if g.KillFile() != "" {
		t.Fatalf("group has kill file %q: not the freezer path", g.KillFile())
	}
	cmd := startPlaced(t, g, `import os, time, subprocess
subprocess.Popen(["sleep", "300"], start_new_session=True)
while True:
    try:
        if os.fork() == 0:
            os.setsid()
    except OSError:
        time.sleep(0.001)
`)
	var pids []int
	for i := 0; i < 1000 && len(pids) < 24; i++ {
		pids, _ = g.Procs()
		time.Sleep(5 * time.Millisecond)
	}
	if len(pids) < 24 {
		t.Fatalf("fork bomb reached %d procs, want >= 24 under a cap of 32", len(pids))
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitEmpty(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for _, pid := range pids {
		if !waitGone(pid) {
			t.Errorf("pid %d survived the freezer kill", pid)
		}
	}
	if s := readTrim(t, filepath.Join(pin, "freezer.state")); s != "FROZEN" {
		t.Errorf("pinned group state %q after a kill, want FROZEN", s)
	}
	if s := readTrim(t, filepath.Join(pin, "cgroup.procs")); s != "" {
		t.Errorf("pinned group holds tasks: %q", s)
	}
	if s := readTrim(t, filepath.Join(g.b.(*v1Group).dir("freezer"), "freezer.state")); s != "THAWED" {
		t.Errorf("kernel group state %q after the kill, want THAWED", s)
	}
	if err := g.Remove(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
