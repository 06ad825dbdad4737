package pool

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestFenceRefusesOlderGeneration: a generation older than one seen is
// refused with ErrFenced; the same or a newer one passes; 0 (no fleet)
// is ignored; each owner has its own.
func TestFenceRefusesOlderGeneration(t *testing.T) {
	p := newTestPool(t)
	steps := []struct {
		owner  string
		gen    uint64
		fenced bool
	}{
		{"o", 0, false}, {"o", 2, false}, {"o", 2, false}, {"o", 1, true}, {"o", 0, false},
		{"p", 1, false}, {"o", 3, false}, {"o", 2, true},
	}
	for i, s := range steps {
		err := p.Fence(s.owner, s.gen)
		if got := errors.Is(err, ErrFenced); got != s.fenced {
			t.Fatalf("step %d: Fence(%q, %d) = %v, want fenced %v", i, s.owner, s.gen, err, s.fenced)
		}
	}
	if err := p.Fence("o", 1<<32); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("Fence over 2^32 = %v, want a bad request", err)
	}
}

// TestFenceNewerDropsKernelUnsaved: a newer generation drops the
// owner's kernel without saving it (its state is the store's): the
// next cell starts from what the store holds, here nothing.
func TestFenceNewerDropsKernelUnsaved(t *testing.T) {
	mk := sharedStorePools(t, -1)
	p := mk()
	if err := p.Fence("o", 1); err != nil {
		t.Fatal(err)
	}
	run(t, p, Request{Owner: "o", Code: "x = 'gen 1'"})
	run(t, p, Request{Owner: "other", Code: "y = 1"})
	if err := p.Fence("o", 2); err != nil {
		t.Fatal(err)
	}
	for _, k := range p.List() {
		if k.Owner == "o" {
			t.Fatalf("o's kernel of generation 1 still runs: %+v", k)
		}
	}
	if c := p.Checkpoints(); len(c) != 0 {
		t.Fatalf("the dropped kernel was saved: %+v", c)
	}
	if res := run(t, p, Request{Owner: "o", Code: "'x' in globals()"}); res.Output != "False\n" || res.Kernel.Restored {
		t.Fatalf("after the newer generation: %+v", res)
	}
	if res := run(t, p, Request{Owner: "other", Code: "y"}); res.Output != "1\n" {
		t.Fatalf("another owner's kernel was touched: %+v", res)
	}
}

// TestFenceLateSaveNeverWins: node A keeps saving an owner after the
// owner was placed on node B under a newer generation (a partition);
// A's saves are newer than the checkpoint B restored, yet B's save
// supersedes them and the owner's next node restores B's state.
func TestFenceLateSaveNeverWins(t *testing.T) {
	mk := fencePools(t)
	a := mk(100 * time.Millisecond)
	if err := a.Fence("o", 1); err != nil {
		t.Fatal(err)
	}
	run(t, a, Request{Owner: "o", Code: "x = 'a1'"})
	idleSaved(t, a, "o", 1<<32)
	b := mk(-1) // B saves only when it closes, after A's late save
	if err := b.Fence("o", 2); err != nil {
		t.Fatal(err)
	}
	if res := run(t, b, Request{Owner: "o", Code: "x = 'b'"}); !res.Kernel.Restored {
		t.Fatalf("B did not restore: %+v", res)
	}
	// A, partitioned, runs and saves again: generation 1<<32 + 1, newer
	// than what B restored.
	run(t, a, Request{Owner: "o", Code: "x = 'a2'"})
	idleSaved(t, a, "o", 1<<32+1)
	if err := b.Close(context.Background()); err != nil { // saves 2<<32
		t.Fatal(err)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := mk(-1)
	if res := run(t, c, Request{Owner: "o", Code: "x"}); res.Output != "'b'\n" || !res.Kernel.Restored {
		t.Fatalf("the owner's next node restored %+v, want B's state", res)
	}
}

// fencePools makes persist pools (nodes) over one local checkpoint
// store, each with its own idle save period (-1: off).
func fencePools(t *testing.T) func(idle time.Duration) *Pool {
	shared, err := NewLocalCheckpointStore(testTempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return func(idle time.Duration) *Pool {
		return newTestPool(t, func(c *Config) {
			c.Policies = map[string]CellPolicy{defaultName: {Persist: true}}
			c.Checkpoints.Store = shared
			c.Checkpoints.Idle = idle
		})
	}
}
