package pool

import (
	"fmt"
	"testing"
	"time"
)

// With a save in flight (fewer saves allowed than idle kernels that need
// one), eviction still takes the least recently used idle kernel, round
// after round. Before, the candidates were cut to the allowed number in
// map order first, so a more recent kernel went about one round in three.
func TestEvictionTakesTheLRUWhileSaving(t *testing.T) {
	p := newPersistPool(t, func(c *Config) {
		c.MaxKernels = 3
		c.Checkpoints.Timeout = 5 * time.Minute
		c.Checkpoints.Idle = -1
	})
	wantStatus(t, run(t, p, Request{Owner: "slow", Code: slowReduceCell(300)}), StatusSuccess)
	slow := liveOf(p, "slow")
	defer func() { _ = slow.k.Kill(); waitSaved(t, p) }()
	owners := []string{"o0", "o1"}
	for _, o := range owners {
		wantStatus(t, run(t, p, Request{Owner: o, Code: "x = 1"}), StatusSuccess)
	}
	// "slow" is the least recently used: the next owner evicts it, and
	// its save runs for as long as the test.
	const rounds = 10
	for i := 2; i < 2+rounds; i++ {
		o := fmt.Sprintf("o%d", i)
		wantStatus(t, run(t, p, Request{Owner: o, Code: "x = 1"}), StatusSuccess)
		owners = append(owners, o)
		if i > 2 {
			waitFor(t, "the evicted kernel's save", func() bool { return p.Stats().KernelsSaving == 1 })
			if lru := owners[i-3]; liveOf(p, lru) != nil {
				t.Fatalf("round %d: the least recently used %s is still live", i-1, lru)
			}
		}
		for _, live := range owners[i-2:] {
			if liveOf(p, live) == nil {
				t.Fatalf("round %d: %s (not the least recently used) was evicted; live: %v", i-1, live, p.List())
			}
		}
	}
	if st := p.Stats(); st.Evicted != rounds || st.KernelsSaving != 1 {
		t.Fatalf("stats %+v, want %d evicted and the slow save in flight", st, rounds)
	}
}
