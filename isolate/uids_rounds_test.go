package isolate

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
)

// TestUIDLeasesExhaustedAndReleasedManyTimes: a 3-uid range leased to
// the last uid and given back, 40 times, by two pools sharing the lock
// dir (as two daemons do) and per owner: every round leases the whole
// range again, one more lease is refused, and nothing stays in use (a
// uid or lock kept by one release would refuse a later round's lease).
func TestUIDLeasesExhaustedAndReleasedManyTimes(t *testing.T) {
	dir := testTempDir(t)
	a, b := newUIDPool(100, 102, false, dir, nil), newUIDPool(100, 102, false, dir, nil)
	per := newUIDPool(200, 202, true, "", nil)
	for round := range 40 {
		var held []int
		for i, p := range []*uidPool{a, b, a} {
			u, err := p.acquire(fmt.Sprintf("o%d", i))
			if errors.Is(err, ErrUnsupported) {
				t.Skipf("uid leases need uid locks, which %s lacks: %v", runtime.GOOS, err)
			}
			if err != nil {
				t.Fatalf("round %d: lease %d of a 3-uid range: %v", round, i+1, err)
			}
			held = append(held, u)
		}
		if held[0] == held[1] || held[1] == held[2] || held[0] == held[2] {
			t.Fatalf("round %d: leases %v share a uid", round, held)
		}
		if u, err := b.acquire("o4"); !errors.Is(err, ErrNoUID) {
			t.Fatalf("round %d: a fourth lease got uid %d, %v; want ErrNoUID", round, u, err)
		}
		a.release(held[0])
		b.release(held[1])
		a.release(held[2])
		if a.inUse()+b.inUse() != 0 {
			t.Fatalf("round %d: %d+%d uids in use after every release", round, a.inUse(), b.inUse())
		}

		// Per owner: two kernels of one owner share a uid; it is free
		// only once both are released.
		x1, _ := per.acquire("x")
		x2, _ := per.acquire("x")
		y, _ := per.acquire("y")
		z, err := per.acquire("z")
		if err != nil || x1 != x2 || len(map[int]bool{x1: true, y: true, z: true}) != 3 {
			t.Fatalf("round %d: per-owner leases x %d/%d, y %d, z %d (%v)", round, x1, x2, y, z, err)
		}
		if _, err := per.acquire("w"); !errors.Is(err, ErrNoUID) {
			t.Fatalf("round %d: a fourth owner's lease: %v, want ErrNoUID", round, err)
		}
		for _, u := range []int{x1, x2, y, z} {
			per.release(u)
		}
		if n := per.inUse(); n != 0 {
			t.Fatalf("round %d: %d per-owner uids in use after every release", round, n)
		}
	}
}
