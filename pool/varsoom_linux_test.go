package pool_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
)

// A repr that allocates past the kernel's real memory cgroup limit gets
// the kernel OOM-killed: ErrKernelDied, its message naming the OOM killer
// and the limit as a cell's does; the owner's next cell runs on a new
// kernel.
func TestVariablesOOMKilled(t *testing.T) {
	iso, state := newRealIsolator(t)
	p := newTestPool(t, func(c *pool.Config) { c.StateDir = state; c.Sandboxes = iso })
	lim := pool.Limits{MemoryMax: 64 << 20}
	warm := run(t, p, pool.Request{Limits: lim, Code: "class A:\n def __repr__(self):\n" +
		"  b = bytearray(256 << 20)\n  for i in range(0, len(b), 4096): b[i] = 1\n  return 'big'\na = A()"})
	wantStatus(t, warm, pool.StatusSuccess)
	_, err := p.Variables(context.Background(), warm.Kernel.ID)
	if !errors.Is(err, pool.ErrKernelDied) || errors.Is(err, pool.ErrInterrupted) || errors.Is(err, pool.ErrTimeout) ||
		!strings.Contains(err.Error(), "ran the kernel out of memory") ||
		!strings.Contains(err.Error(), "killed by the out-of-memory killer at its memory limit of 64MiB") {
		t.Fatalf("listing whose repr outgrew the memory limit: %v; want ErrKernelDied naming the OOM killer and 64MiB", err)
	}
	next := run(t, p, pool.Request{Limits: lim, Code: "print('a' in dir())"})
	if next.Status != pool.StatusSuccess || next.Output != "False\n" || next.Kernel.ID == warm.Kernel.ID || !next.Kernel.StateReset {
		t.Fatalf("after the listing's OOM kill: %+v; want a new kernel, state reset", next)
	}
}
