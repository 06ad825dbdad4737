//go:build !windows

package envscrub

import "testing"

// testTempDir is t.TempDir; the Windows variant works around Wine.
func testTempDir(t testing.TB) string {
	t.Helper()
	return t.TempDir()
}

// requireRealSymlinks: symlinks are real here.
func requireRealSymlinks(testing.TB) {}
