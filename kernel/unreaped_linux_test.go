package kernel

import (
	"errors"
	"testing"
)

// Unreaped is true while the kernel's runner is not reaped (alive, or a
// zombie the reaper has not waited for yet) and false once Kill returned:
// the runner was reaped, its pid may name another process.
func TestUnreapedUntilReaped(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	if !k.Unreaped() {
		t.Fatal("Unreaped false for a live kernel")
	}
	if err := k.Kill(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(k.Err(), ErrClosed) || k.Unreaped() {
		t.Fatalf("after Kill: Err %v, Unreaped %v; want ErrClosed, false", k.Err(), k.Unreaped())
	}
}
