package pool

import (
	"testing"
)

// TestSessionEndKeepsOtherSessionsMasks: deleting session a forgets the
// request env values a's kernels masked, and only a's: session b's value,
// restored from its checkpoint into a new kernel, is still masked.
func TestSessionEndKeepsOtherSessionsMasks(t *testing.T) {
	const aVal, bVal = "a-planted-0123456789", "b-planted-0123456789"
	p := newPersistPool(t, func(c *Config) {
		c.MaxKernels = 1
		c.Output = maskFactory{&secretRecorder{}}
	})
	a := mustSession(t, p, SessionSpec{Owner: "a"})
	b := mustSession(t, p, SessionSpec{Owner: "b"})
	wantStatus(t, run(t, p, Request{Session: b.ID, Env: map[string]string{"B_SECRET": bVal}, Code: "import os\ncopy = os.environ['B_SECRET']"}), StatusSuccess)
	wantStatus(t, run(t, p, Request{Session: a.ID, Env: map[string]string{"A_SECRET": aVal}, Code: "import os\ncopy = os.environ['A_SECRET']"}), StatusSuccess) // evicts b's kernel, saved
	run(t, p, Request{Owner: "c", Code: "y = 1"})                                                                                                               // evicts a's kernel: a has none at its delete
	waitSaved(t, p)
	masked := func() map[string]bool { // session id -> masks remembered
		p.mu.Lock()
		defer p.mu.Unlock()
		out := map[string]bool{}
		for k := range p.keyMasks {
			out[k.session] = true
		}
		return out
	}
	if m := masked(); !m[a.ID] || !m[b.ID] {
		t.Fatalf("before the delete: masks of %v, want both sessions'", m)
	}
	if err := p.DeleteSession(a.ID); err != nil {
		t.Fatal(err)
	}
	if m := masked(); m[a.ID] || !m[b.ID] {
		t.Fatalf("after deleting a: masks of %v, want b's and not a's", m)
	}
	res := run(t, p, Request{Session: b.ID, Code: "print(copy[:4], copy)"})
	if !res.Kernel.Restored || res.Output != "b-pl [MASKED]\n" {
		t.Fatalf("b's restored value after a's delete: %+v", res)
	}
}
