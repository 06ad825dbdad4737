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

// Killing a kernel drops its key's remembered masks and only those: another
// key's checkpoint still restores values its masks must hide.
func TestDropStoredStateForgetsOnlyItsKeysMasks(t *testing.T) {
	a, b := key{owner: "a", mode: "m"}, key{owner: "b", mode: "m"}
	p := &Pool{keyMasks: map[key]*maskEntry{a: {values: []string{"s1"}}, b: {values: []string{"s2"}}}}
	p.dropStoredState(&live{key: a}) // nothing stored: no store call
	if _, ok := p.keyMasks[a]; ok || p.keyMasks[b] == nil || len(p.keyMasks) != 1 {
		t.Fatalf("masks after a's kill: %v, want only b's", p.keyMasks)
	}
}
