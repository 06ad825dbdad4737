package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kernpool/kernpool/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testParent is a parent name no one else uses: one per test.
func testParent(t testing.TB) string {
	return testenv.CgroupParent(t, "kernpool-test")
}

func newTestManager(t testing.TB) *Manager {
	t.Helper()
	state := t.TempDir()
	m, err := New(Config{Parent: testParent(t), Marker: state, StateDir: state})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if _, err := m.Sweep(); err != nil {
			t.Errorf("cleanup sweep: %v", err)
		}
		if err := m.Close(); err != nil {
			t.Errorf("cleanup close: %v", err)
		}
	})
	return m
}

// placeCode is what the kernel's runner does first: place itself.
const placeCode = `import os
for p in os.environ.get("KERNPOOL_CGROUP_PROCS", "").split(os.pathsep):
    if p:
        with open(p, "w") as f: f.write("0")
print("placed", flush=True)
`

// startPlaced starts python running placeCode then code, in its own process
// group, in g (clone3 on v2, self-placement on v1), and waits for "placed".
// Cleanup kills the group and reaps.
func startPlaced(t testing.TB, g *Group, code string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testenv.Python, "-c", placeCode+code)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Env = []string{"KERNPOOL_CGROUP_PROCS=" + strings.Join(g.PlacementFiles(), string(os.PathListSeparator))}
	fd, err := g.OpenFD()
	switch {
	case err == nil:
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(fd.Fd())
	case !errors.Is(err, ErrUnsupported):
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if fd != nil {
		fd.Close()
	}
	t.Cleanup(func() {
		_ = g.Kill()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "placed\n" {
		t.Fatalf("child did not place itself: %q %v", buf, err)
	}
	return cmd
}

func dirGone(t testing.TB, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists (err %v)", dir, err)
	}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil && !isZombie(pid) }

func isZombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// waitGone polls until pid is dead or reaped (no timing assertion: the
// caller fails only if it never goes).
func waitGone(pid int) bool {
	for i := 0; i < 500; i++ {
		if !alive(pid) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}
