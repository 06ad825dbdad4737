package redisreg_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/fleet/redisreg"
	"github.com/kernpool/kernpool/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T) *redisreg.Registry {
	t.Helper()
	srv := redistest.Start(t)
	r, err := redisreg.Open(context.Background(), srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestPlaceOnlyOneWins: routers placing one owner at once from the same
// record: exactly one writes, every one gets the winner's record, and
// generations grow fleet-wide.
func TestPlaceOnlyOneWins(t *testing.T) {
	r := open(t)
	ctx := context.Background()
	const routers = 16
	var wg sync.WaitGroup
	got := make([]fleet.Placement, routers)
	wrote := make([]bool, routers)
	for i := range routers {
		wg.Go(func() {
			var err error
			got[i], wrote[i], err = r.Place(ctx, "acme/alice", 0, []string{"n1", "n2"}[i%2], fleet.OwnerPlaced)
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	winners := 0
	for i := range routers {
		if wrote[i] {
			winners++
		}
		if got[i] != got[0] {
			t.Fatalf("router %d got %+v, router 0 %+v", i, got[i], got[0])
		}
	}
	if winners != 1 || got[0].Generation != 1 {
		t.Fatalf("%d routers wrote; record %+v", winners, got[0])
	}
	p, ok, err := r.Owner(ctx, "acme/alice")
	if err != nil || !ok || p != got[0] {
		t.Fatalf("Owner = %+v %v %v, want %+v", p, ok, err, got[0])
	}
	// A stale prev is refused; the current one moves it.
	if _, w, err := r.Place(ctx, "acme/alice", 0, "n3", fleet.OwnerMoved); err != nil || w {
		t.Fatalf("stale place: wrote %v, %v", w, err)
	}
	moved, w, err := r.Place(ctx, "acme/alice", 1, "n3", fleet.OwnerMoved)
	if err != nil || !w || moved != (fleet.Placement{Node: "n3", Generation: 2, State: fleet.OwnerMoved}) {
		t.Fatalf("move: %+v %v %v", moved, w, err)
	}
	// Another owner's first placement takes the next fleet-wide generation.
	if other, _, err := r.Place(ctx, "bob", 0, "n1", fleet.OwnerPlaced); err != nil || other.Generation != 3 {
		t.Fatalf("bob: %+v %v", other, err)
	}
	// Forget with a stale generation keeps the record; with its own, drops it.
	if err := r.Forget(ctx, "acme/alice", 1); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := r.Owner(ctx, "acme/alice"); !ok {
		t.Fatal("a stale Forget dropped the record")
	}
	if err := r.Forget(ctx, "acme/alice", 2); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := r.Owner(ctx, "acme/alice"); ok {
		t.Fatal("Forget kept the record")
	}
	if p, w, err := r.Place(ctx, "acme/alice", 2, "n1", fleet.OwnerMoved); err != nil || w || p != (fleet.Placement{}) {
		t.Fatalf("place over a forgotten record with a stale prev: %+v %v %v", p, w, err)
	}
	if p, _, err := r.Place(ctx, "acme/alice", 0, "n1", fleet.OwnerPlaced); err != nil || p.Generation != 4 {
		t.Fatalf("placed again: %+v %v (want generation 4: never reused)", p, err)
	}
}

// TestHeartbeatExpires: a node is listed while its heartbeat is live,
// and not once its TTL ran out or it withdrew; a malformed
// registration is refused.
func TestHeartbeatExpires(t *testing.T) {
	r := open(t)
	ctx := context.Background()
	a := fleet.Node{Name: "a", URL: "https://10.0.0.1:8443", Free: 3, Max: 4}
	b := fleet.Node{Name: "b", URL: "http://127.0.0.1:9000", Draining: true}
	if err := r.Publish(ctx, a, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := r.Publish(ctx, b, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	nodes, err := r.Nodes(ctx)
	if err != nil || len(nodes) != 2 {
		t.Fatalf("nodes = %+v, %v", nodes, err)
	}
	// Redis expires the key on its own clock; wait for that event.
	deadline := time.Now().Add(time.Minute)
	for {
		nodes, err = r.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's heartbeat never expired: %+v", nodes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if nodes[0] != a {
		t.Fatalf("nodes = %+v, want only %+v", nodes, a)
	}
	if err := r.Withdraw(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if nodes, _ := r.Nodes(ctx); len(nodes) != 0 {
		t.Fatalf("after withdraw: %+v", nodes)
	}
	for _, bad := range []fleet.Node{{Name: "a b", URL: "http://x:1"}, {Name: "a", URL: "ftp://x"}, {Name: "a", URL: "http://x:1/path"}} {
		if err := r.Publish(ctx, bad, time.Hour); err == nil {
			t.Errorf("Publish(%+v) accepted", bad)
		}
	}
}

// TestMarkOnlyItsNode: a node marks the state of a record that names it,
// keeping node and generation; a record naming another node, or none,
// is left as it is.
func TestMarkOnlyItsNode(t *testing.T) {
	r := open(t)
	ctx := context.Background()
	p, _, err := r.Place(ctx, "o", 0, "n1", fleet.OwnerPlaced)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := r.Mark(ctx, "o", "n2", fleet.OwnerSaving); err != nil || ok {
		t.Fatalf("another node's mark: %v %v", ok, err)
	}
	if ok, err := r.Mark(ctx, "nobody", "n1", fleet.OwnerSaving); err != nil || ok {
		t.Fatalf("mark without a record: %v %v", ok, err)
	}
	if _, ok, _ := r.Owner(ctx, "nobody"); ok {
		t.Fatal("a mark created a record")
	}
	for _, st := range []fleet.OwnerState{fleet.OwnerSaving, fleet.OwnerSaved} {
		if ok, err := r.Mark(ctx, "o", "n1", st); err != nil || !ok {
			t.Fatalf("mark %s: %v %v", st, ok, err)
		}
		got, _, _ := r.Owner(ctx, "o")
		if got != (fleet.Placement{Node: "n1", Generation: p.Generation, State: st}) {
			t.Fatalf("after mark %s: %+v (placed %+v)", st, got, p)
		}
	}
}
