package pool

import (
	"errors"
	"testing"
)

// KernelOf finds an owner's one live kernel by owner and mode: the id of
// the kernel that ran its cell, a conflict when the mode is left out and
// two match, and not found for an owner without a kernel.
func TestKernelOfFindsTheOwnersKernel(t *testing.T) {
	p := newTestPool(t)
	def := run(t, p, Request{Owner: "a", Code: "1"})
	small := run(t, p, Request{Owner: "a", Mode: "small", Code: "1"})
	wantStatus(t, def, StatusSuccess)
	wantStatus(t, small, StatusSuccess)
	for _, tc := range []struct {
		owner, mode, id string
		err             error
	}{
		{"a", "default", def.Kernel.ID, nil},
		{"a", "small", small.Kernel.ID, nil},
		{"a", "", "", ErrConflict},
		{"b", "", "", ErrNotFound},
		{"a", "other", "", ErrNotFound},
	} {
		id, err := p.KernelOf(tc.owner, tc.mode)
		if id != tc.id || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("KernelOf(%q, %q) = %q, %v; want %q, %v", tc.owner, tc.mode, id, err, tc.id, tc.err)
		}
	}
}
