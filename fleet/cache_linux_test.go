package fleet_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kernpool/kernpool/fleet"
)

// TestRouterStaleRecordFencedOnce: a router's cached record names the
// node an owner was moved off (another router moved it): that node
// refuses the old generation before running anything, the router reads
// the record and resends to the owner's new node, and the cell runs
// exactly once, there.
func TestRouterStaleRecordFencedOnce(t *testing.T) {
	f := newFleet(t)
	a, b := f.node("a"), f.node("b")
	f.waitNodes(2)
	r := client(t, f.router(), adminToken)
	exec(t, r, "o", "x = 'on the first node'") // placed; the router caches the record
	old := ownerNode("o", a, b)
	if old == nil {
		t.Fatal("o runs on no node, or on both")
	}
	next := map[*node]*node{a: b, b: a}[old]
	ctx := context.Background()
	rec, _, err := f.reg.Owner(ctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	moved, wrote, err := f.reg.Place(ctx, "o", rec.Generation, next.name, fleet.OwnerMoved)
	if err != nil || !wrote {
		t.Fatalf("move: %+v %v %v", moved, wrote, err)
	}
	waitFor(t, "the move to reach the old node", func() bool {
		gen, here, err := old.placed.Read(ctx, "o")
		return err == nil && gen == moved.Generation && !here
	})
	marker := filepath.Join(t.TempDir(), "runs")
	res := exec(t, r, "o", "open("+pyStr(marker)+", 'a').write('ran\\n')\n'x' in globals()")
	if res.Output != "False\n" || next.kernelsOf("o") != 1 {
		t.Fatalf("the cell did not run on the owner's new node: %+v", res)
	}
	if runs, err := os.ReadFile(marker); err != nil || string(runs) != "ran\n" {
		t.Fatalf("the cell ran %q times, want once (%v)", runs, err)
	}
}
