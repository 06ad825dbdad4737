package isolate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/isolate/kinit"
	"github.com/kernpool/kernpool/kernel"
)

// TestMain doubles as the kernel init step: kernels started by these tests
// re-execute this test binary (/proc/self/exe) as their init.
func TestMain(m *testing.M) {
	kinit.Main()
	goleak.VerifyTestMain(m)
}

// stateDir is a state dir kernel uids can traverse (0711 up to /tmp).
func stateDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func testParent(t testing.TB) string {
	return testenv.CgroupParent(t, "kernpool-test")
}

// newIso makes an Isolator with its own state dir and cgroup parent.
func newIso(t testing.TB, edit func(*Config)) *Isolator {
	t.Helper()
	cfg := DefaultConfig(stateDir(t))
	cfg.CgroupParent = testParent(t)
	if edit != nil {
		edit(&cfg)
	}
	iso, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := iso.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return iso
}

func kernelID(t testing.TB) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "k" + hex.EncodeToString(b)
}

// startKernel starts a real kernel in a new sandbox of iso.
func startKernel(t testing.TB, iso *Isolator, owner, mode string, lim Limits) (*kernel.Kernel, *Sandbox) {
	t.Helper()
	id := kernelID(t)
	sb, err := iso.reserve(id, owner, mode, lim)
	if err != nil {
		t.Fatalf("NewSandbox: %v", err)
	}
	k, err := kernel.Start(context.Background(), kernel.Spec{
		ID: id, Interpreter: testenv.Python, StateDir: iso.cfg.StateDir,
		Env: []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, Sandbox: sb,
	})
	if err != nil {
		t.Fatalf("kernel.Start: %v", err)
	}
	t.Cleanup(func() { _ = k.Kill() })
	return k, sb
}

func run(t testing.TB, k *kernel.Kernel, code string) *kernel.Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := k.Exec(ctx, kernel.Cell{Code: code})
	if err != nil {
		t.Fatalf("Exec(%q): %v", code, err)
	}
	if r.Status != "ok" {
		t.Fatalf("Exec(%q): status %s: %s%s", code, r.Status, r.Traceback, r.Stderr)
	}
	return r
}

// groupDirs are the kernel's group directories (one per hierarchy).
func groupDirs(iso *Isolator, id string) []string {
	var out []string
	for _, p := range iso.Report().Parents {
		out = append(out, filepath.Join(p, id))
	}
	return out
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return !(i > 0 && len(s) > i+2 && s[i+2] == 'Z')
}

// assertGone checks, after teardown, that no pid and no group dir remain.
func assertGone(t testing.TB, iso *Isolator, id string, pids []int) {
	t.Helper()
	for _, pid := range pids {
		gone := false
		for i := 0; i < 300 && !gone; i++ {
			gone = !alive(pid)
			if !gone {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if !gone {
			t.Errorf("pid %d survived", pid)
		}
	}
	for _, d := range groupDirs(iso, id) {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("group dir %s remains (%v)", d, err)
		}
	}
}

func itoa(n int) string { return fmt.Sprint(n) }

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}
