//go:build unix

package pool

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A repr that ends its kernel (os._exit) is the tenant's doing, not a
// failure: ErrKernelDied (no other listing sentinel), its message saying
// the kernel died and how; the owner's next cell runs on a new kernel,
// its state reset.
func TestVariablesKernelDied(t *testing.T) {
	p := newTestPool(t)
	warm := run(t, p, Request{Code: "import os\nclass A:\n def __repr__(self):\n  os._exit(3)\na = A()"})
	id, pid := warm.Kernel.ID, pidOf(t, p, warm.Kernel.ID)
	_, err := p.Variables(context.Background(), id)
	if !errors.Is(err, ErrKernelDied) || errors.Is(err, ErrInterrupted) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrNotFound) ||
		!strings.Contains(err.Error(), "the kernel died during the listing") || !strings.Contains(err.Error(), "the kernel exited with code 3") {
		t.Fatalf("listing whose repr called os._exit(3): %v; want ErrKernelDied saying the kernel exited with code 3", err)
	}
	assertDead(t, pid)
	next := run(t, p, Request{Code: "print('a' in dir())"})
	if next.Status != StatusSuccess || next.Output != "False\n" || next.Kernel.ID == id || !next.Kernel.StateReset {
		t.Fatalf("after the listing's death: %+v; want a new kernel, state reset", next)
	}
}
