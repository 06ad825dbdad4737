package fleet_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/fleet/redisreg"
	"github.com/kernpool/kernpool/internal/redistest"
)

// countingReg counts the record reads that reach Redis.
type countingReg struct {
	*redisreg.Registry
	reads atomic.Int64
}

func (c *countingReg) Owner(ctx context.Context, owner string) (fleet.Placement, bool, error) {
	c.reads.Add(1)
	return c.Registry.Owner(ctx, owner)
}

// waitFor polls cond until it holds (the deadline only stops a hung test).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPlacementCacheFollowsTheRecords: a node's view of an owner's
// record is read once and then answered without Redis while its watch
// is live; a move of the owner by another router reaches it; and once
// Redis is gone the node answers no record from memory: it fails
// closed (its fence answers 503) instead of trusting what it cached.
func TestPlacementCacheFollowsTheRecords(t *testing.T) {
	srv := redistest.Start(t)
	r, err := redisreg.Open(context.Background(), srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	reg := &countingReg{Registry: r}
	ctx := context.Background()
	placed, _, err := reg.Place(ctx, "o", 0, "n1", fleet.OwnerPlaced)
	if err != nil {
		t.Fatal(err)
	}
	c := fleet.StartPlacementCache(fleet.PlacementCacheConfig{Registry: reg, Node: "n1", Interval: 500 * time.Millisecond})
	defer c.Stop()
	read := func() (uint64, bool, error) { return c.Read(ctx, "o") }
	// Cached once the watch is live: a read that reaches no Redis.
	waitFor(t, "a cached read", func() bool {
		before := reg.reads.Load()
		gen, here, err := read()
		return err == nil && gen == placed.Generation && here && reg.reads.Load() == before
	})
	before := reg.reads.Load()
	for range 10 {
		if gen, here, err := read(); err != nil || gen != placed.Generation || !here {
			t.Fatalf("read %d, %v, %v; want %d here", gen, here, err, placed.Generation)
		}
	}
	if n := reg.reads.Load() - before; n != 0 {
		t.Fatalf("10 warm checks read Redis %d times, want 0", n)
	}
	// Another router moves the owner: the watch drops the cached record.
	moved, _, err := reg.Place(ctx, "o", placed.Generation, "n2", fleet.OwnerMoved)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the move to reach the node", func() bool {
		gen, here, err := read()
		return err == nil && gen == moved.Generation && !here
	})
	// Redis goes away: no answer from memory once the watch is lost.
	srv.Kill()
	waitFor(t, "a failed check", func() bool {
		_, _, err := read()
		return err != nil
	})
}
