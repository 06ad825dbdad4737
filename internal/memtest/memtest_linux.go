package memtest

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// PeakGrowth runs f and returns the growth of this process's peak RSS
// during f over its RSS before f, in bytes. It skips the test where the
// peak cannot be reset (no /proc/self/clear_refs).
func PeakGrowth(tb testing.TB, f func()) int64 {
	tb.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Skipf("cannot reset the peak RSS: %v", err)
	}
	before := field(tb, "VmRSS:")
	f()
	return field(tb, "VmHWM:") - before
}

// field reads one kB figure of /proc/self/status, in bytes.
func field(tb testing.TB, name string) int64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatalf("read /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			kb, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			if err != nil {
				tb.Fatalf("parse %s: %v", name, err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("no %s in /proc/self/status", name)
	return 0
}
