package audit

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/pool"
)

// TestQueueBounds: with the writer stalled (none runs here), the queue
// takes exactly 4096 cells, and code up to exactly 64 MiB, and counts
// each cell past a bound as one failure, keeping what it holds.
func TestQueueBounds(t *testing.T) {
	for _, tc := range []struct {
		name         string
		cells        int
		codeBytes    int
		wantPending  int
		wantFailures int
	}{
		{"lines: the last one that fits", 4096, 0, 4096, 0},
		{"lines: one past", 4097, 0, 4096, 1},
		{"lines: ten past", 4106, 0, 4096, 10},
		{"code: 64 MiB exactly", 4, 16 << 20, 4, 0},
		{"code: one cell past", 5, 16 << 20, 4, 1},
		{"code: a byte past", 2, 32<<20 + 1, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failures := 0
			l := &Log{cfg: Config{OnFailure: func() { failures++ }}, log: hclog.NewNullLogger(), kick: make(chan struct{}, 1)}
			ev := &pool.CellEvent{Owner: "o", Code: strings.Repeat("x", tc.codeBytes)}
			for range tc.cells {
				l.CellDone(ev)
			}
			if len(l.pending) != tc.wantPending || failures != tc.wantFailures {
				t.Fatalf("%d cells queued, %d failures; want %d and %d", len(l.pending), failures, tc.wantPending, tc.wantFailures)
			}
		})
	}
}
