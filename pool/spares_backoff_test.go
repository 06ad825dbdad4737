package pool

import (
	"testing"
	"time"
)

// A mode whose spares keep failing waits 1 s after the first failure,
// doubling per failure, and never more than a minute.
func TestSpareBackoffDoublesToAMinute(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second},
		{6, 32 * time.Second}, {7, time.Minute}, {9, time.Minute}, {1 << 20, time.Minute},
	} {
		if got := spareBackoff(tc.n); got != tc.want {
			t.Errorf("after %d failures: %v, want %v", tc.n, got, tc.want)
		}
	}
}

// With every mode short of spares backed off, the refiller is told to
// sleep until the earliest mode may try again, whichever order the modes
// sort in.
func TestNextSpareWaitsForTheEarliestRetry(t *testing.T) {
	for _, order := range [][2]time.Duration{{time.Hour, 2 * time.Hour}, {2 * time.Hour, time.Hour}} {
		p := &Pool{cfg: Config{MaxKernels: 8}}
		now := time.Now()
		p.sp.warm = map[string]Warm{"a": {Spares: 1}, "b": {Spares: 1}, "c": {Spares: 0}}
		p.sp.retryAt = map[string]time.Time{"a": now.Add(order[0]), "b": now.Add(order[1])}
		mode, _, wait, ok := p.nextSpare()
		if ok || mode != "" {
			t.Fatalf("%v: started %q while every mode is backed off", order, mode)
		}
		if wait <= 59*time.Minute || wait > time.Hour {
			t.Errorf("retries in %v: wait %v, want the earliest (just under 1h)", order, wait)
		}
	}
}
