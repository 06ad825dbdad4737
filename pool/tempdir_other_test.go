//go:build !windows

package pool

import "testing"

// testTempDir is t.TempDir; the Windows variant works around Wine.
func testTempDir(t testing.TB) string {
	t.Helper()
	return t.TempDir()
}
