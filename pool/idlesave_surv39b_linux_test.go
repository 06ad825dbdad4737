package pool

import (
	"testing"
	"time"
)

// A kernel is due for its idle save once it has been idle for exactly
// checkpoint_idle, not a nanosecond before.
func TestIdleSaveDueAtExactlyTheIdleTime(t *testing.T) {
	p := newPersistPool(t, func(c *Config) { c.Checkpoints.Idle = time.Hour }) // the ticker stays out
	run(t, p, Request{Owner: "a", Code: "x = 41"})
	p.mu.Lock()
	var last time.Time
	for k, s := range p.slots {
		if k.owner == "a" {
			last = s.lastUsed
		}
	}
	p.mu.Unlock()
	// Whether a save was started stays set once it is over.
	tried := func() bool {
		lv := liveOf(p, "a")
		p.mu.Lock()
		defer p.mu.Unlock()
		return lv.idleTried == lv.cells
	}
	p.startIdleSaves(last.Add(time.Hour - time.Nanosecond))
	if tried() {
		t.Fatal("an idle save started a nanosecond before the idle time")
	}
	p.startIdleSaves(last.Add(time.Hour))
	if !tried() {
		t.Fatal("no idle save started at the idle time")
	}
	idleSaved(t, p, "a", 1)
}
