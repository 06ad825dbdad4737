package pool_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
)

// A repr that allocates past the kernel's real memory cgroup limit gets
// the kernel OOM-killed: ErrKernelDied, its message naming the OOM killer
// and the limit as a cell's does. It counts as a cell's OOM kill, at
// once: Died and OOMKilled, the kernel ended for "oom". The owner's next
// cell runs on a new kernel (no state_reset, as after a cell's OOM kill);
// another owner's kernel lives on with its state.
func TestVariablesOOMKilled(t *testing.T) {
	iso, state := newRealIsolator(t)
	rec := pool.NewRecorder()
	p := newTestPool(t, func(c *pool.Config) { c.StateDir = state; c.Sandboxes = iso; c.Observer = rec })
	lim := pool.Limits{MemoryMax: 64 << 20}
	other := run(t, p, pool.Request{Owner: "other", Limits: lim, Code: "y = 7"})
	warm := run(t, p, pool.Request{Limits: lim, Code: "class A:\n def __repr__(self):\n" +
		"  b = bytearray(256 << 20)\n  for i in range(0, len(b), 4096): b[i] = 1\n  return 'big'\na = A()"})
	wantStatus(t, warm, pool.StatusSuccess)
	before := p.Stats()
	_, err := p.Variables(context.Background(), warm.Kernel.ID)
	if !errors.Is(err, pool.ErrKernelDied) || errors.Is(err, pool.ErrInterrupted) || errors.Is(err, pool.ErrTimeout) ||
		!strings.Contains(err.Error(), "ran the kernel out of memory") ||
		!strings.Contains(err.Error(), "killed by the out-of-memory killer at its memory limit of 64MiB") {
		t.Fatalf("listing whose repr outgrew the memory limit: %v; want ErrKernelDied naming the OOM killer and 64MiB", err)
	}
	st := p.Stats()
	if st.OOMKilled-before.OOMKilled != 1 || st.Died-before.Died != 1 {
		t.Fatalf("stats after the listing's OOM kill: %+v (before %+v); want OOMKilled and Died +1", st, before)
	}
	wantEnds := map[pool.EndReason]int{pool.EndOOM: 1}
	if ends := rec.Ends(); !maps.Equal(ends, wantEnds) {
		t.Fatalf("kernels ended after the listing's OOM kill: %v; want %v", ends, wantEnds)
	}
	next := run(t, p, pool.Request{Limits: lim, Code: "print('a' in dir())"})
	if next.Status != pool.StatusSuccess || next.Output != "False\n" || next.Kernel.ID == warm.Kernel.ID || next.Kernel.Reused || next.Kernel.StateReset {
		t.Fatalf("after the listing's OOM kill: %+v; want a new kernel, no state_reset", next)
	}
	if ends := rec.Ends(); !maps.Equal(ends, wantEnds) || p.Stats().OOMKilled != st.OOMKilled {
		t.Fatalf("the next cell counted the dead kernel again: ends %v, stats %+v", ends, p.Stats())
	}
	kept := run(t, p, pool.Request{Owner: "other", Limits: lim, Code: "print(y)"})
	if kept.Output != "7\n" || kept.Kernel.ID != other.Kernel.ID || !kept.Kernel.Reused {
		t.Fatalf("another owner's kernel after the listing's OOM kill: %+v; want y kept in kernel %s", kept, other.Kernel.ID)
	}
}
