package pool

import (
	"testing"
	"time"
)

// The idle saver looks for due kernels four times per idle period,
// never more often than every 10 ms (a 1 ns idle, which a config may
// give, still makes a ticker) nor less often than every 5 s.
func TestIdlePeriodBounds(t *testing.T) {
	for idle, want := range map[time.Duration]time.Duration{
		time.Nanosecond:        10 * time.Millisecond,
		40 * time.Millisecond:  10 * time.Millisecond,
		100 * time.Millisecond: 25 * time.Millisecond,
		4 * time.Second:        time.Second,
		20 * time.Second:       5 * time.Second,
		time.Hour:              5 * time.Second,
	} {
		if got := idlePeriod(idle); got != want {
			t.Errorf("idlePeriod(%s) = %s, want %s", idle, got, want)
		}
	}
}
