package pool

import "testing"

// stored files the cell count a save holds, 0 included (a restored
// kernel saved before its first cell ran): the kernel is then clean and
// an eviction needs no second save; -1 (a refusal) leaves the count.
func TestStoredRecordsTheSavedCellCount(t *testing.T) {
	for _, tc := range []struct {
		ran, before, saved, want int
		clean                    bool
	}{
		{ran: 0, before: -1, saved: 0, want: 0, clean: true},
		{ran: 3, before: -1, saved: 2, want: 2, clean: false},
		{ran: 1, before: 1, saved: -1, want: 1, clean: true},
	} {
		p := &Pool{}
		lv := &live{cells: tc.ran, storedCells: tc.before}
		p.stored(lv, 7, tc.saved, nil)
		if lv.gen != 7 || !lv.wrote || lv.storedCells != tc.want || lv.cleanLocked() != tc.clean {
			t.Errorf("ran %d, saved %d over %d: gen %d wrote %v storedCells %d clean %v; want 7 true %d %v",
				tc.ran, tc.saved, tc.before, lv.gen, lv.wrote, lv.storedCells, lv.cleanLocked(), tc.want, tc.clean)
		}
	}
}
