package kernel

import (
	"slices"
	"testing"
)

// The runner's H marks name at most four helpers, each a pid in 1 to
// 2^31-1, and only until the first cell's begin mark on stderr: pid 0,
// 2^31, a fifth helper and marks after that begin are dropped.
func TestRunnerHelperMarksWithinBounds(t *testing.T) {
	c := newCellState(64, 64, 0, 1<<20)
	for _, pid := range []int64{0, -1, 1 << 31, 1<<31 - 1, 1, 2, 3, 4} {
		c.helper(pid)
	}
	if got, want := c.helperPids(), []int{1<<31 - 1, 1, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("helpers %v, want %v", got, want)
	}

	c = newCellState(64, 64, 0, 1<<20)
	c.helper(7)
	c.begun(true, 1) // the first cell's begin mark on stderr
	c.helper(8)
	if got := c.helperPids(); !slices.Equal(got, []int{7}) {
		t.Fatalf("helpers %v after the first cell began, want [7]", got)
	}
}
