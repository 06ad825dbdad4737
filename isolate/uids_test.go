package isolate

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
)

func TestUIDPoolPerKernel(t *testing.T) {
	p := newUIDPool(100, 102, false, "", map[int]bool{101: true})
	a, err := p.acquire("alice")
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.acquire("alice")
	if err != nil {
		t.Fatal(err)
	}
	if a == b || a == 101 || b == 101 {
		t.Fatalf("got %d, %d; want two distinct untainted uids", a, b)
	}
	if _, err := p.acquire("bob"); !errors.Is(err, ErrNoUID) {
		t.Fatalf("third acquire: %v, want ErrNoUID", err)
	}
	p.release(a)
	c, err := p.acquire("bob")
	if err != nil || c != a {
		t.Fatalf("after release: %d, %v; want %d", c, err, a)
	}
}

func TestUIDPoolPerOwner(t *testing.T) {
	p := newUIDPool(60000, 60009, true, "", nil)
	a1, _ := p.acquire("alice")
	a2, _ := p.acquire("alice")
	b1, _ := p.acquire("bob")
	if a1 != a2 {
		t.Fatalf("alice got %d and %d; want one stable uid", a1, a2)
	}
	if b1 == a1 {
		t.Fatalf("bob shares alice's uid %d", a1)
	}
	p.release(a1)
	if a3, _ := p.acquire("alice"); a3 != a1 {
		t.Fatalf("alice lost her uid while a kernel held it: %d vs %d", a3, a1)
	}
	p.release(a1)
	p.release(a1)
	p.release(a1)
	if p.inUse() != 1 {
		t.Fatalf("in use = %d, want 1 (bob)", p.inUse())
	}
	// A stable uid survives release: the hash puts alice back on it.
	if a4, _ := p.acquire("alice"); a4 != a1 {
		t.Fatalf("alice's uid not stable: %d vs %d", a4, a1)
	}
}

func TestUIDPoolTaint(t *testing.T) {
	p := newUIDPool(1, 1, false, "", nil)
	u, _ := p.acquire("x")
	p.taint(u)
	if _, err := p.acquire("x"); !errors.Is(err, ErrNoUID) {
		t.Fatalf("tainted uid reused: %v", err)
	}
}

// Two pools sharing a lock dir (two daemons with one range) never lease
// the same uid; a released uid becomes available to the other.
func TestUIDLeasesAreExclusiveAcrossPools(t *testing.T) {
	dir := testTempDir(t)
	a := newUIDPool(100, 101, false, dir, nil)
	b := newUIDPool(100, 101, false, dir, nil)
	ua, err := a.acquire("x")
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("uid leases need uid locks, which %s lacks: %v", runtime.GOOS, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ub, err := b.acquire("y")
	if err != nil {
		t.Fatal(err)
	}
	if ua == ub {
		t.Fatalf("both pools leased uid %d", ua)
	}
	if _, err := b.acquire("z"); !errors.Is(err, ErrNoUID) {
		t.Fatalf("third lease of a 2-uid range: err = %v, want ErrNoUID", err)
	}
	a.release(ua)
	got, err := b.acquire("z")
	if err != nil || got != ua {
		t.Fatalf("after release: uid %d, err %v; want %d", got, err, ua)
	}
	// A retired (tainted) uid stays locked: its processes may linger.
	b.taint(got)
	if u, err := a.acquire("w"); err == nil {
		t.Fatalf("a pool leased uid %d while every uid is leased or retired elsewhere", u)
	}
}

// Per owner, an owner's uid comes from its name, not from who came first:
// a restarted daemon meets its owners in any order and must give each the
// uid its files and processes had. The four owners hash to four distinct
// uids of the 4-uid range (FNV-1a of their names mod 4: alice 3, bob 0,
// carol 2, erin 1), so none has to probe past another's.
func TestUIDPoolPerOwnerUIDIndependentOfOrder(t *testing.T) {
	owners := []string{"alice", "bob", "carol", "erin"}
	alone := map[string]int{}
	seen := map[int]bool{}
	for _, o := range owners {
		u, err := newUIDPool(100, 103, true, "", nil).acquire(o)
		if err != nil {
			t.Fatal(err)
		}
		alone[o], seen[u] = u, true
	}
	if len(seen) != len(owners) {
		t.Fatalf("owners alone got uids %v; want %d distinct ones", alone, len(owners))
	}
	for _, o := range owners {
		p := newUIDPool(100, 103, true, "", nil)
		for _, other := range owners {
			if other != o {
				if _, err := p.acquire(other); err != nil {
					t.Fatal(err)
				}
			}
		}
		if u, err := p.acquire(o); err != nil || u != alone[o] {
			t.Fatalf("%s after the others: uid %d (%v); alone it gets %d", o, u, err, alone[o])
		}
	}
}

// Per owner, every uid handed out lies in the configured range: a uid
// below it may be a host account's.
func TestUIDPoolPerOwnerStaysInRange(t *testing.T) {
	p := newUIDPool(60000, 60009, true, "", nil)
	got := map[int]string{}
	for i := range 10 {
		o := fmt.Sprintf("owner%d", i)
		u, err := p.acquire(o)
		if err != nil {
			t.Fatal(err)
		}
		if u < 60000 || u > 60009 {
			t.Fatalf("%s got uid %d, outside the range 60000-60009", o, u)
		}
		if prev, ok := got[u]; ok {
			t.Fatalf("%s and %s share uid %d", prev, o, u)
		}
		got[u] = o
	}
}

// Per owner, the uid stays the owner's while any of its kernels holds it:
// with one uid in the range, a second owner is refused until the first
// owner's last kernel releases it (a shared uid would let the owners'
// kernels signal each other and read each other's files).
func TestUIDPoolPerOwnerRefsKeepUID(t *testing.T) {
	p := newUIDPool(500, 500, true, "", nil)
	for range 2 {
		if u, err := p.acquire("alice"); err != nil || u != 500 {
			t.Fatalf("alice: uid %d, %v; want 500", u, err)
		}
	}
	p.release(500)
	if u, err := p.acquire("bob"); !errors.Is(err, ErrNoUID) {
		t.Fatalf("bob got uid %d (%v) while alice's second kernel holds it; want ErrNoUID", u, err)
	}
	p.release(500)
	if u, err := p.acquire("bob"); err != nil || u != 500 {
		t.Fatalf("bob after alice's last release: uid %d, %v; want 500", u, err)
	}
}
