package fleet

import (
	"fmt"
	"testing"
)

func nodes(free ...int) []Node {
	var out []Node
	for i, f := range free {
		out = append(out, Node{Name: fmt.Sprintf("n%d", i), URL: "http://127.0.0.1:1", Free: f, Max: 10})
	}
	return out
}

// TestPlaceSticksAndSkips: the same owner and nodes give the same node;
// draining and skipped nodes never win; no candidate is not ok.
func TestPlaceSticksAndSkips(t *testing.T) {
	ns := nodes(5, 5, 5)
	first, ok := Place("acme/alice", ns, nil)
	if !ok {
		t.Fatal("no node")
	}
	for range 3 {
		if again, _ := Place("acme/alice", ns, nil); again != first {
			t.Fatalf("placement moved: %+v then %+v", first, again)
		}
	}
	skipped, ok := Place("acme/alice", ns, map[string]bool{first.Name: true})
	if !ok || skipped.Name == first.Name {
		t.Fatalf("skip: %+v", skipped)
	}
	for i := range ns {
		ns[i].Draining = ns[i].Name == first.Name
	}
	if d, _ := Place("acme/alice", ns, nil); d.Name == first.Name {
		t.Fatal("a draining node was chosen")
	}
	for i := range ns {
		ns[i].Draining = true
	}
	if _, ok := Place("acme/alice", ns, nil); ok {
		t.Fatal("placed with every node draining")
	}
	if _, ok := Place("acme/alice", nil, nil); ok {
		t.Fatal("placed with no node")
	}
}

// TestPlaceWeightsFreeCapacity: owners spread in proportion to free
// slots plus one (free 9 against free 0: about 10 to 1).
func TestPlaceWeightsFreeCapacity(t *testing.T) {
	ns := nodes(9, 0)
	count := map[string]int{}
	for i := range 10000 {
		n, _ := Place(fmt.Sprintf("owner-%d", i), ns, nil)
		count[n.Name]++
	}
	ratio := float64(count["n0"]) / float64(count["n1"])
	if ratio < 8 || ratio > 12 {
		t.Fatalf("placements %v: ratio %.1f, want about 10", count, ratio)
	}
}

// TestPlaceNewNodeMovesOnlyItsWinners: a node that joins takes some new
// placements; every owner whose choice changed now chooses it (no owner
// moves between the old nodes), and it wins about its share.
func TestPlaceNewNodeMovesOnlyItsWinners(t *testing.T) {
	before, after := nodes(4, 4, 4), nodes(4, 4, 4, 4)
	changed := 0
	for i := range 10000 {
		o := fmt.Sprintf("owner-%d", i)
		a, _ := Place(o, before, nil)
		b, _ := Place(o, after, nil)
		if a != b {
			changed++
			if b.Name != "n3" {
				t.Fatalf("%s moved from %s to %s, not to the new node", o, a.Name, b.Name)
			}
		}
	}
	if changed < 2000 || changed > 3000 {
		t.Fatalf("%d of 10000 owners chose the new node, want about 2500", changed)
	}
}
