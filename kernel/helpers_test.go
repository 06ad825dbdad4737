package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kernpool/kernpool/internal/testenv"
)

// testSentinel lets tests forge frames (start's unexported hook).
const testSentinel = "@@KERNPOOL-TESTSENTINEL@@"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	goleak.VerifyTestMain(m)
}

func requireProc(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
}

func baseSpec(t testing.TB) Spec {
	return Spec{
		ID:          "k" + strconv.FormatInt(time.Now().UnixNano()%1e12, 16),
		Interpreter: testenv.Python,
		StateDir:    testTempDir(t),
		Env:         []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"},
	}
}

// startKernel starts a kernel and registers a cleanup that kills it and
// proves nothing of it remains.
func startKernel(t testing.TB, spec Spec, sentinel string) *Kernel {
	t.Helper()
	testenv.RequirePython(t)
	k, err := start(context.Background(), spec, sentinel)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { requireGone(t, k) })
	return k
}

// requireGone kills k and checks its process and staging dir are gone.
func requireGone(t testing.TB, k *Kernel) {
	t.Helper()
	if err := k.Kill(); err != nil {
		t.Errorf("kill: %v", err)
	}
	select {
	case <-k.Done():
	default:
		t.Errorf("Done not closed after Kill")
	}
	if _, err := os.Stat(k.StagingDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staging dir %s survives: %v", k.StagingDir(), err)
	}
	if alive(k.Pid()) {
		t.Errorf("kernel pid %d survives", k.Pid())
	}
}

// alive says whether pid names a live (non-zombie) process.
func alive(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitDead polls /proc (tests may poll) until pid is dead or d passed.
func waitDead(pid int, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if !alive(pid) {
			return true
		}
	}
	return !alive(pid)
}

func mustExec(t testing.TB, k *Kernel, code string) *Reply {
	t.Helper()
	rep, err := k.Exec(context.Background(), Cell{Code: code})
	if err != nil {
		t.Fatalf("exec %q: %v", code, err)
	}
	return rep
}

func atoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

func itoa(n int) string { return strconv.Itoa(n) }

// sigintPending says whether a SIGINT waits for delivery to pid or any
// of its threads (/proc/PID/task/*/status: SigPnd, and the shared ShdPnd).
func sigintPending(t *testing.T, pid int) bool {
	t.Helper()
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if len(files) == 0 {
		t.Fatalf("no threads of pid %d in /proc", pid)
	}
	const sigint = 1 << (2 - 1)
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok || (k != "SigPnd" && k != "ShdPnd") {
				continue
			}
			if n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && n&sigint != 0 {
				return true
			}
		}
	}
	return false
}
