package envscrub

import (
	"testing"

	"github.com/kernpool/kernpool/integration/wine/wintest"
)

// testTempDir is t.TempDir, made to work under Wine on Windows.
func testTempDir(t testing.TB) string {
	t.Helper()
	return wintest.TempDir(t)
}

// requireRealSymlinks skips under Wine: there the spill went straight
// through links made by os.Symlink (observed, 2026-11-29), i.e. Wine does not
// present them to Windows APIs as reparse points; the refusal of a linked
// spill dir or planted file needs a real Windows runner.
func requireRealSymlinks(t testing.TB) {
	t.Helper()
	if wintest.OnWine() {
		t.Skip("Wine does not present os.Symlink links as reparse points; needs a real Windows")
	}
}
