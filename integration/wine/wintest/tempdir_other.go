//go:build !windows

package wintest

import "testing"

// TempDir is tb.TempDir; the Windows variant works around Wine.
func TempDir(tb testing.TB) string {
	tb.Helper()
	return tb.TempDir()
}

// OnWine is false: only a Windows binary can run under Wine.
func OnWine() bool { return false }
