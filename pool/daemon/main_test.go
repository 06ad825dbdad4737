package daemon_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kernpool/kernpool/isolate/kinit"
)

// TestMain doubles as the kernel init step (isolate/kinit): a sandboxed
// daemon's kernels are this test binary re-executed.
func TestMain(m *testing.M) {
	kinit.Main()
	goleak.VerifyTestMain(m)
}
