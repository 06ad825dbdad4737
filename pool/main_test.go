package pool

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/isolate/kinit"
)

// TestMain doubles as the kernel init step (isolate/kinit), which the
// real isolator's kernels (real_linux_test.go) are started through.
func TestMain(m *testing.M) {
	kinit.Main()
	goleak.VerifyTestMain(m)
}

// newTestPool starts a pool over a fresh state dir; it is closed (and
// proven empty) when the test ends.
func newTestPool(t testing.TB, mods ...func(*Config)) *Pool {
	t.Helper()
	if !filepath.IsAbs(testenv.Python) {
		// Config refuses a non-absolute DefaultInterpreter, so even the
		// tests that start no kernel need a real interpreter path.
		t.Skipf("needs a python interpreter path: %s is none on %s", testenv.Python, runtime.GOOS)
	}
	testenv.RequirePython(t)
	cfg := Config{
		StateDir:           testTempDir(t),
		DefaultInterpreter: testenv.Python,
		CellTimeout:        60 * time.Second,
		Logger:             testenv.Logger(t, hclog.Warn),
		// A generous interrupt grace: on a loaded host (a VM's vCPU lagged
		// 7 s) the default 2 s ran out before the interpreter handled
		// KeyboardInterrupt, killing kernels whose state the tests check.
		// Tests of the grace itself set their own policy.
		Policies: map[string]CellPolicy{defaultName: {InterruptGrace: testenv.Patience}},
	}
	for _, m := range mods {
		m(&cfg)
	}
	testenv.SkipUnsandboxed(t, cfg.Sandboxes != nil)
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if t.Failed() {
			// Nothing of a failed test is worth draining: Close kills at
			// once, so a broken drain (a mutant of Close) fails the test
			// instead of hanging its cleanup until the go test timeout.
			done, cancel := context.WithCancel(ctx)
			cancel()
			ctx = done
		}
		if err := p.Close(ctx); err != nil && !t.Failed() {
			t.Errorf("Close: %v", err)
		}
		assertNoStaging(t, cfg.StateDir)
	})
	return p
}

// run executes code for owner and fails the test on a pool error.
func run(t testing.TB, p *Pool, req Request) *Result {
	t.Helper()
	res, err := p.Execute(context.Background(), req)
	if err != nil {
		t.Fatalf("Execute(%q): %v", req.Code, err)
	}
	return res
}

// wantStatus fails unless res has the status.
func wantStatus(t testing.TB, res *Result, status Status) {
	t.Helper()
	if res.Status != status {
		t.Fatalf("status = %q, want %q (error %q, output %q)", res.Status, status, res.Error, res.Output)
	}
}

// pidAlive reports whether pid is a live (non-zombie) process.
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// assertDead fails unless pid is gone. Teardown returns only once the
// kernel is reaped, so no waiting is needed here.
func assertDead(t testing.TB, pid int) {
	t.Helper()
	if pidAlive(pid) {
		t.Fatalf("kernel pid %d is still alive", pid)
	}
}

// waitFor polls cond (in the test only; the product never polls) until
// it holds or testenv.Patience ends a hung test.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, what, cond)
}

// assertNoStaging fails if a kernel staging dir survived.
func assertNoStaging(t testing.TB, stateDir string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(stateDir, "kernels"))
	if err != nil && !os.IsNotExist(err) {
		t.Errorf("read staging root: %v", err)
		return
	}
	for _, e := range entries {
		t.Errorf("staging dir survived: %s", e.Name())
	}
}

// pidOf returns the pid of the live kernel with id.
func pidOf(t testing.TB, p *Pool, id string) int {
	t.Helper()
	for _, k := range p.List() {
		if k.ID == id {
			return k.Pid
		}
	}
	t.Fatalf("kernel %s is not listed", id)
	return 0
}

// assertStagingGone fails if the staging dir of kernel id survived its teardown.
func assertStagingGone(t testing.TB, p *Pool, id string) {
	t.Helper()
	if id == "" {
		t.Fatal("no kernel id")
	}
	if _, err := os.Stat(filepath.Join(p.cfg.StateDir, "kernels", id)); !os.IsNotExist(err) {
		t.Fatalf("staging dir of %s survived its teardown (stat: %v)", id, err)
	}
}
