package pool

import (
	"fmt"
	"testing"
	"time"
)

// registryPool is a pool with only its registry (no kernels, no
// goroutines): the reaper's and the eviction's choices are plain
// functions of it. Mode "persist" saves an evicted kernel's state.
func registryPool(maxKernels int, idle time.Duration) *Pool {
	p := &Pool{
		cfg:    Config{MaxKernels: maxKernels, IdleTimeout: idle},
		slots:  map[key]*slot{},
		byID:   map[string]*slot{},
		saving: map[key]chan struct{}{},
	}
	pol := map[string]CellPolicy{defaultName: {}, "persist": {Persist: true}}
	p.policies.Store(&pol)
	return p
}

// addIdle registers an idle kernel of owner in mode, last used at
// lastUsed; dirty: it ran a cell whose state the store does not hold.
func addIdle(p *Pool, owner, mode string, lastUsed time.Time, dirty bool) *live {
	k := key{owner: owner, mode: mode}
	lv := &live{key: k, id: "k-" + owner, owner: owner, mode: mode, cells: 1, storedCells: 1}
	if dirty {
		lv.storedCells = -1
	}
	s := &slot{key: k, sem: make(chan struct{}, 1), live: lv, lastUsed: lastUsed}
	p.slots[k] = s
	p.byID[lv.id] = s
	return lv
}

// A kernel is reaped once it has been idle longer than idle_timeout
// (docs/config.md: "kernels idle longer are reaped"): idle exactly the
// timeout it stays, a nanosecond more and it goes, counted in Reaped.
func TestReapOnlyPastTheIdleTimeout(t *testing.T) {
	const idle = 30 * time.Minute
	last := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name   string
		now    time.Time
		reaped bool
	}{
		{"idle exactly the timeout", last.Add(idle), false},
		{"idle a nanosecond longer", last.Add(idle + time.Nanosecond), true},
	} {
		p := registryPool(4, idle)
		lv := addIdle(p, "a", defaultName, last, false)
		gone := p.reapLocked(tc.now)
		if tc.reaped {
			if len(gone) != 1 || gone[0].lv != lv || gone[0].reason != reasonReaped || p.stats.Reaped != 1 || len(p.slots) != 0 {
				t.Errorf("%s: %d doomed %v, %d reaped, %d slots; want the kernel reaped", tc.name, len(gone), gone, p.stats.Reaped, len(p.slots))
			}
		} else if len(gone) != 0 || p.stats.Reaped != 0 || len(p.slots) != 1 {
			t.Errorf("%s: %d doomed, %d reaped, %d slots; want the kernel kept", tc.name, len(gone), p.stats.Reaped, len(p.slots))
		}
	}
}

// At max_kernels, the kernel evicted is one whose state the store holds
// already (nothing to save) even when it is the most recently used:
// docs/design.md, "the least recently used idle kernel among those that
// need no save, else among those a save is still allowed for". Five
// older kernels need a save; the registry's map order varies, so each
// round starts from another order and the clean one must go every time.
func TestEvictionTakesTheKernelNeedingNoSaveFirst(t *testing.T) {
	last := time.Unix(1_700_000_000, 0)
	for round := range 20 {
		p := registryPool(6, time.Hour)
		for i := range 5 {
			addIdle(p, fmt.Sprintf("dirty%d", i), "persist", last.Add(time.Duration(i)*time.Second), true)
		}
		clean := addIdle(p, "clean", "persist", last.Add(time.Minute), false)
		gone, err := p.makeRoomLocked()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if len(gone) != 1 || gone[0].lv != clean || gone[0].reason != reasonEvicted {
			var ids []string
			for _, d := range gone {
				ids = append(ids, d.lv.id)
			}
			t.Fatalf("round %d: evicted %v; want only %s (it needs no save)", round, ids, clean.id)
		}
		if p.stats.Evicted != 1 || p.savingN != 0 || len(p.slots) != 5 {
			t.Fatalf("round %d: %d evicted, %d saving, %d slots; want 1, 0, 5", round, p.stats.Evicted, p.savingN, len(p.slots))
		}
	}
}
