//go:build unix

package pool

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
)

// A repr that ends its kernel (os._exit) is the tenant's doing, not a
// failure: ErrKernelDied (no other listing sentinel), its message saying
// the kernel died and how. The death is counted as a cell's is, at once
// (Died, not OOMKilled; the kernel ended as a crash), the owner's next
// cell runs on a new kernel (not a state_reset: as after a cell's death,
// the listing's answer told the loss), and another owner's kernel
// lives on with its state.
func TestVariablesKernelDied(t *testing.T) {
	rec := newRecorder()
	p := newTestPool(t, func(c *Config) { c.Observer = rec })
	other := run(t, p, Request{Owner: "other", Code: "y = 7"})
	warm := run(t, p, Request{Code: "import os\nclass A:\n def __repr__(self):\n  os._exit(3)\na = A()"})
	id, pid := warm.Kernel.ID, pidOf(t, p, warm.Kernel.ID)
	before := p.Stats()
	_, err := p.Variables(context.Background(), id)
	if !errors.Is(err, ErrKernelDied) || errors.Is(err, ErrInterrupted) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrNotFound) ||
		!strings.Contains(err.Error(), "the kernel died during the listing") || !strings.Contains(err.Error(), "the kernel exited with code 3") {
		t.Fatalf("listing whose repr called os._exit(3): %v; want ErrKernelDied saying the kernel exited with code 3", err)
	}
	assertDead(t, pid)
	st := p.Stats()
	if st.Died-before.Died != 1 || st.OOMKilled != before.OOMKilled || st.Interrupted != before.Interrupted || st.Timeouts != before.Timeouts {
		t.Fatalf("stats after the listing's death: %+v (before %+v); want Died +1, nothing else", st, before)
	}
	wantEnds := map[EndReason]int{EndCrash: 1}
	if ends := rec.Ends(); !maps.Equal(ends, wantEnds) {
		t.Fatalf("kernels ended after the listing's death: %v; want %v", ends, wantEnds)
	}
	next := run(t, p, Request{Code: "print('a' in dir())"})
	if next.Status != StatusSuccess || next.Output != "False\n" || next.Kernel.ID == id || next.Kernel.Reused || next.Kernel.StateReset {
		t.Fatalf("after the listing's death: %+v; want a new kernel, no state_reset", next)
	}
	if ends := rec.Ends(); !maps.Equal(ends, wantEnds) || p.Stats().Died != st.Died {
		t.Fatalf("the next cell counted the dead kernel again: ends %v, stats %+v", ends, p.Stats())
	}
	kept := run(t, p, Request{Owner: "other", Code: "print(y)"})
	if kept.Output != "7\n" || kept.Kernel.ID != other.Kernel.ID || !kept.Kernel.Reused {
		t.Fatalf("another owner's kernel after the listing's death: %+v; want y kept in kernel %s", kept, other.Kernel.ID)
	}
}
