package pool

import (
	"testing"
	"time"
)

// A key's remembered masks outlive its checkpoints' retention by
// maskGrace (an hour) exactly: at retention + 1h since the last touch the
// entry is kept, a nanosecond later the reaper's sweep drops it, and only
// that key's.
func TestMaskEntryKeptUntilRetentionPlusAnHour(t *testing.T) {
	const retention = 30 * time.Minute
	p := &Pool{cfg: Config{Checkpoints: CheckpointConfig{Retention: retention}}}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	old, fresh := key{owner: "a", mode: "m"}, key{owner: "b", mode: "m"}
	p.keyMasks = map[key]*maskEntry{
		old:   {values: []string{"s1"}, touched: t0},
		fresh: {values: []string{"s2"}, touched: t0.Add(time.Minute)},
	}
	edge := t0.Add(retention + time.Hour)
	p.expireMasksLocked(edge)
	if len(p.keyMasks) != 2 {
		t.Fatalf("at retention+1h: %d entries left, want 2", len(p.keyMasks))
	}
	p.expireMasksLocked(edge.Add(time.Nanosecond))
	if _, ok := p.keyMasks[old]; ok || len(p.keyMasks) != 1 || p.keyMasks[fresh] == nil {
		t.Fatalf("1ns past retention+1h: entries %v, want only b's", p.keyMasks)
	}
}
