//go:build unix

package pool

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// A kernel a listing's repr ended (os._exit) leaves the registry with the
// listing's answer, as a cell's death does: it is no longer counted live
// (Stats, the observer's started-minus-ended), listed, found by id, or
// holding a place under MaxKernels (a third owner's cell fits without an
// eviction), while another owner's kernel stays live with its variables.
func TestVariablesDeathLeavesRegistry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other bool // another owner's kernel is live beside it
	}{
		{"alone", false},
		{"beside another owner", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			p := newTestPool(t, func(c *Config) { c.Observer = rec; c.MaxKernels = 2 })
			var otherID string
			if tc.other {
				otherID = run(t, p, Request{Owner: "other", Code: "y = 7"}).Kernel.ID
			}
			id := run(t, p, Request{Code: "import os\nclass A:\n def __repr__(self):\n  os._exit(3)\na = A()"}).Kernel.ID
			live := 1
			if tc.other {
				live = 2
			}
			assertLive(t, p, rec, live, "before the listing")
			if _, err := p.Variables(context.Background(), id); !errors.Is(err, ErrKernelDied) {
				t.Fatalf("listing whose repr called os._exit(3): %v; want ErrKernelDied", err)
			}
			assertLive(t, p, rec, live-1, "after the listing that ended the kernel")
			for _, k := range p.List() {
				if k.ID == id {
					t.Fatalf("the dead kernel %s is still listed: %+v", id, p.List())
				}
			}
			if err := p.Kill(id); !errors.Is(err, ErrNotFound) {
				t.Fatalf("kill of the dead kernel %s: %v; want ErrNotFound (it left the registry)", id, err)
			}
			if !tc.other {
				return
			}
			if ids := kernelIDs(p); !slices.Equal(ids, []string{otherID}) {
				t.Fatalf("kernels listed after the listing's death: %v; want the other owner's %s alone", ids, otherID)
			}
			wantStatus(t, run(t, p, Request{Owner: "third", Code: "pass"}), StatusSuccess)
			if st := p.Stats(); st.Evicted != 0 || st.KernelsLive != 2 {
				t.Fatalf("a third owner's cell under MaxKernels 2: evicted %d, live %d; want 0, 2 (the dead kernel's place is free)", st.Evicted, st.KernelsLive)
			}
			v, err := p.Variables(context.Background(), otherID)
			if err != nil || v.Total != 1 || v.Variables[0].Name != "y" || v.Variables[0].Repr != "7" {
				t.Fatalf("the other owner's variables: %+v, %v; want y = 7", v, err)
			}
			kept := run(t, p, Request{Owner: "other", Code: "print(y)"})
			if kept.Output != "7\n" || kept.Kernel.ID != otherID || !kept.Kernel.Reused {
				t.Fatalf("the other owner's kernel: %+v; want y kept in kernel %s", kept, otherID)
			}
		})
	}
}

// assertLive checks that Stats and the observer (kernels started minus
// ended: the kernels-live gauge) both count want live kernels.
func assertLive(t *testing.T, p *Pool, rec *recorder, want int, when string) {
	t.Helper()
	rec.mu.Lock()
	gauge := rec.starts
	for _, n := range rec.ends {
		gauge -= n
	}
	rec.mu.Unlock()
	if st := p.Stats(); st.KernelsLive != want || gauge != want {
		t.Fatalf("%s: KernelsLive %d, the observer's live count %d; want %d", when, st.KernelsLive, gauge, want)
	}
}

// kernelIDs is the ids of List, in its order.
func kernelIDs(p *Pool) []string {
	var ids []string
	for _, k := range p.List() {
		ids = append(ids, k.ID)
	}
	return ids
}
