package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Python is the interpreter every test kernel runs: the real one, never the
// python3 on PATH (a slow pyenv shim on the development hosts).
const Python = "/usr/bin/python3"

// RequireRoot skips unless the test runs as root (it creates cgroups,
// switches uids, chowns sockets or mounts in a private namespace).
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root")
	}
}

// RequirePython skips unless Python can run here. On Windows the Linux
// path is not absolute and no Windows python is installed (under Wine the
// path even resolves, to a Linux binary Windows cannot start).
func RequirePython(tb testing.TB) {
	tb.Helper()
	if !filepath.IsAbs(Python) {
		tb.Skipf("needs a python kernel: %s is no interpreter path on %s", Python, runtime.GOOS)
	}
	if _, err := os.Stat(Python); err != nil {
		tb.Skipf("needs %s: %v", Python, err)
	}
}

// RequireCgroupMode skips unless the test runs as root and the host's
// cgroup layout have (cgroup.DetectMode's answer: testenv cannot import
// package cgroup, whose own tests use it) is one of want.
func RequireCgroupMode[M comparable](tb testing.TB, have M, want ...M) {
	tb.Helper()
	RequireRoot(tb)
	for _, w := range want {
		if have == w {
			return
		}
	}
	tb.Skipf("needs a cgroup layout in %v; host layout is %v", want, have)
}

// Logger is an hclog.Logger at level that writes into the test's log.
func Logger(tb testing.TB, level hclog.Level) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Level: level, Output: logWriter{tb}})
}

// logWriter routes log lines into tb.Log.
type logWriter struct{ tb testing.TB }

func (w logWriter) Write(b []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// Patience bounds every wait a test makes for an event: long enough that
// only a hung test reaches it on a loaded 2-core host (a deadline stops a
// hang; it never decides how fast the product must be). PatienceEnv
// shortens it where a wait that runs out is the expected outcome: the
// mutation check sets it for mutant runs, whose tests fail by waiting for
// an event that never comes.
var Patience = patience()

// PatienceEnv names the variable that overrides Patience (a Go duration).
const PatienceEnv = "KERNPOOL_TEST_PATIENCE"

func patience() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(PatienceEnv)); err == nil && d > 0 {
		return d
	}
	return 2 * time.Minute
}

// SandboxedOnlyEnv, set to 1, skips the tests that start kernels with no
// real sandbox (plain process groups). .ci/run's cgroup-v2 guest sets it:
// such a kernel touches no cgroup, namespace or kernel uid, so the guest
// would only repeat what the host's unit step runs, at TCG's speed.
const SandboxedOnlyEnv = "KERNPOOL_TEST_SANDBOXED_ONLY"

// SkipUnsandboxed skips tb when SandboxedOnlyEnv is 1 and its kernels run
// with no real sandbox.
func SkipUnsandboxed(tb testing.TB, sandboxed bool) {
	tb.Helper()
	if !sandboxed && os.Getenv(SandboxedOnlyEnv) == "1" {
		tb.Skipf("starts kernels with no sandbox, which touch no cgroup: %s=1 runs only sandboxed ones (the host's unit step runs this)", SandboxedOnlyEnv)
	}
}

// WaitFor polls cond until it holds, failing tb after Patience. Tests poll;
// the product never does.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(Patience); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", Patience, what)
		}
	}
}
