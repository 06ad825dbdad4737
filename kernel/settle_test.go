package kernel

import "testing"

// A cell settles once it has both its reply frame and its stderr end mark
// (or a frame saying stderr is closed), in either order, with one wake-up
// of the waiting Exec: nothing is on settled before that, exactly one
// reply after it, and marks of other cells change nothing.
func TestCellSettlesOnFrameAndMark(t *testing.T) {
	frame := func(closed bool) func(*cellState) error {
		return func(c *cellState) error {
			return c.frame(&wireReply{ID: "7", Status: "ok", StderrClosed: closed})
		}
	}
	mark := func(n int64) func(*cellState) error {
		return func(c *cellState) error { c.mark(n); return nil }
	}
	// settleAt is the step after which the cell must have settled; the
	// steps after it must not settle it again.
	tests := []struct {
		name     string
		steps    []func(*cellState) error
		settleAt int
	}{
		{"frame then mark", []func(*cellState) error{frame(false), mark(7)}, 1},
		{"mark then frame", []func(*cellState) error{mark(7), frame(false)}, 1},
		{"stale marks around the frame", []func(*cellState) error{mark(6), frame(false), mark(8), mark(7), mark(7)}, 3},
		{"frame with stderr closed", []func(*cellState) error{frame(true), mark(7)}, 0},
		{"mark, then frame with stderr closed", []func(*cellState) error{mark(7), frame(true)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCellState(100, 100, 0, 1<<20)
			c.begin(7, "7", nil)
			for i, step := range tt.steps {
				if err := step(c); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				select {
				case rep := <-c.settled:
					if i != tt.settleAt {
						t.Fatalf("settled after step %d, want after step %d", i, tt.settleAt)
					}
					if rep.ID != "7" {
						t.Fatalf("settled with reply %q", rep.ID)
					}
				default:
					if i == tt.settleAt {
						t.Fatalf("not settled after step %d", i)
					}
				}
			}
		})
	}
}

// A frame that arrived without its end mark (the kernel died between the
// two) is still the cell's reply, and a cell's end leaves nothing for the
// next one.
func TestUnsettledFrameKeptAndCleared(t *testing.T) {
	c := newCellState(100, 100, 0, 1<<20)
	c.begin(1, "1", nil)
	if err := c.frame(&wireReply{ID: "1", Status: "ok"}); err != nil {
		t.Fatal(err)
	}
	if rep := c.frameUnsettled(); rep == nil || rep.ID != "1" {
		t.Fatalf("unsettled frame %+v, want reply 1", rep)
	}
	c.mark(1)
	c.end()
	c.begin(2, "2", nil)
	select {
	case rep := <-c.settled:
		t.Fatalf("cell 2 settled by cell 1's reply %q", rep.ID)
	default:
	}
	if rep := c.frameUnsettled(); rep != nil {
		t.Fatalf("cell 2 has cell 1's frame %q", rep.ID)
	}
}
