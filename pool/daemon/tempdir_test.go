package daemon_test

import (
	"testing"

	"github.com/kernpool/kernpool/integration/wine/wintest"
)

// testTempDir is t.TempDir, made to work under Wine on Windows.
func testTempDir(t testing.TB) string {
	t.Helper()
	return wintest.TempDir(t)
}
