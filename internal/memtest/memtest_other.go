//go:build !linux

package memtest

import "testing"

// PeakGrowth skips: only Linux reports (and resets) the peak RSS.
func PeakGrowth(tb testing.TB, f func()) int64 {
	tb.Helper()
	tb.Skip("peak RSS is measured through Linux /proc only")
	return 0
}
