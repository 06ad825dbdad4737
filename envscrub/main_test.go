package envscrub

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper())
	}
	goleak.VerifyTestMain(m)
}

// requireRoot skips tests that need root (mounts in a private namespace).
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
}

// requirePython skips tests that need the real interpreter.
func requirePython(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	// A Linux path: on Windows it is not absolute and no Windows python is
	// installed (under Wine it even resolves, to a binary Windows cannot run).
	if !filepath.IsAbs(py) {
		t.Skipf("needs a python interpreter: %s is none on %s", py, runtime.GOOS)
	}
	if _, err := os.Stat(py); err != nil {
		t.Skipf("needs %s: %v", py, err)
	}
	return py
}
