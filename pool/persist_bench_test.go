package pool

import (
	"fmt"
	"testing"
)

// BenchmarkPersistEvictionCycle: two owners alternate on a cap of one
// kernel, so every cell evicts the other owner's kernel and starts a new
// one; with persist each cycle also saves the evicted namespace and
// restores the owner's. "off" is the floor measured in the same run.
func BenchmarkPersistEvictionCycle(b *testing.B) {
	const state = "import json as j\nx = 1\nd = {'k': list(range(1000))}\nrows = [{'i': i, 's': str(i)} for i in range(1000)]"
	for _, persist := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "persist"}[persist], func(b *testing.B) {
			p := newTestPool(b, func(c *Config) {
				c.MaxKernels = 1
				c.Policies = map[string]CellPolicy{defaultName: {Persist: persist}}
			})
			for _, o := range []string{"a", "b"} {
				run(b, p, Request{Owner: o, Code: state})
			}
			i := 0
			for b.Loop() {
				owner := []string{"a", "b"}[i%2]
				i++
				res := run(b, p, Request{Owner: owner, Code: "len(rows)"})
				// Without persist the evicted state is gone: NameError.
				if persist && res.Output != "1000\n" || !persist && res.Status != StatusError {
					b.Fatalf("cell %d: %+v", i, res)
				}
			}
			if ev := p.Stats().Evicted; ev < uint64(i) {
				b.Fatal(fmt.Sprint("evictions: ", ev))
			}
		})
	}
}
