package pool

import (
	"errors"
	"fmt"
	"testing"
)

// TestFenceGenerationBound: a placement generation fills the high 32
// bits of its checkpoint generations (docs/fleet.md, "Fencing"), so
// 2^32-1 is the largest accepted; 2^32 and more are a bad request whose
// message names the bound.
func TestFenceGenerationBound(t *testing.T) {
	p := newTestPool(t)
	for _, c := range []struct {
		gen uint64
		msg string // "" accepted
	}{
		{4294967295, ""},
		{4294967296, "bad request: owner generation 4294967296 is 2^32 or more"},
		{18446744073709551615, "bad request: owner generation 18446744073709551615 is 2^32 or more"},
	} {
		err := p.Fence("o", c.gen)
		switch {
		case c.msg == "" && err != nil:
			t.Errorf("Fence(%d) = %v, want accepted", c.gen, err)
		case c.msg != "" && (!errors.Is(err, ErrBadRequest) || err.Error() != c.msg):
			t.Errorf("Fence(%d) = %v, want ErrBadRequest %q", c.gen, err, c.msg)
		}
	}
}

// TestFenceTableForgetsPastLimit: the node keeps the generations of
// 65536 owners; a new owner past that forgets those holding no kernel
// here (an old generation of theirs is accepted again), and only then:
// a full table still fences every owner in it.
func TestFenceTableForgetsPastLimit(t *testing.T) {
	const limit = 65536 // maxFences, written out
	p := newTestPool(t)
	fence := func(owner string, gen uint64) error {
		t.Helper()
		err := p.Fence(owner, gen)
		if err != nil && !errors.Is(err, ErrFenced) {
			t.Fatalf("Fence(%q, %d): %v", owner, gen, err)
		}
		return err
	}
	// "held" has a kernel here, so it is never forgotten.
	fence("held", 2)
	run(t, p, Request{Owner: "held", Code: "1"})
	for i := 1; i < limit; i++ {
		fence(fmt.Sprintf("o%d", i), 2)
	}
	// The table holds exactly limit owners: none was forgotten.
	for _, o := range []string{"held", "o1", "o2", fmt.Sprintf("o%d", limit-1)} {
		if err := fence(o, 1); err == nil {
			t.Fatalf("with %d owners, %s's older generation was accepted: forgotten before the table was full", limit, o)
		}
	}
	fence("new", 2) // one owner past the limit
	for _, c := range []struct {
		owner  string
		fenced bool
	}{
		{"new", true}, {"held", true}, {"o1", false}, {fmt.Sprintf("o%d", limit-1), false},
	} {
		err := fence(c.owner, 1)
		if got := err != nil; got != c.fenced {
			t.Errorf("past the limit: Fence(%q, 1) = %v, want fenced %v", c.owner, err, c.fenced)
		}
	}
	// Forgetting fences drops no kernel.
	if l := p.List(); len(l) != 1 || l[0].Owner != "held" {
		t.Errorf("kernels %+v, want held's only", l)
	}
}
