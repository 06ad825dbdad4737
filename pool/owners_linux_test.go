package pool

import (
	"slices"
	"strings"
	"testing"
)

// bystander is an owner whose kernels and session must come through
// another owner's operations untouched: the same kernels (ids and pids),
// their state, the session.
type bystander struct {
	owner, session, sessKernel, implicit string
	pids                                 []int
}

// newBystander starts owner's session kernel and implicit kernel, each
// holding state.
func newBystander(t *testing.T, p *Pool, owner string) *bystander {
	t.Helper()
	b := &bystander{owner: owner, session: mustSession(t, p, SessionSpec{Owner: owner}).ID}
	b.sessKernel = run(t, p, Request{Session: b.session, Owner: owner, Code: "held = " + quoted(owner)}).Kernel.ID
	b.implicit = run(t, p, Request{Owner: owner, Code: "held = 'implicit'"}).Kernel.ID
	b.pids = []int{pidOf(t, p, b.sessKernel), pidOf(t, p, b.implicit)}
	return b
}

func quoted(s string) string { return "'" + strings.ReplaceAll(s, "'", "") + "'" }

// check fails unless b's kernels are the same live processes with their
// state, and its session still resolves to its kernel.
func (b *bystander) check(t *testing.T, p *Pool, after string) {
	t.Helper()
	for i, id := range []string{b.sessKernel, b.implicit} {
		if owner, ok := p.OwnerOf(id); !ok || owner != b.owner || !pidAlive(b.pids[i]) {
			t.Fatalf("after %s: %s's kernel %s (pid %d) is gone (owner %q, %t)", after, b.owner, id, b.pids[i], owner, ok)
		}
	}
	if id, err := p.SessionKernel(b.session); err != nil || id != b.sessKernel {
		t.Fatalf("after %s: %s's session kernel = %q, %v; want %s", after, b.owner, id, err, b.sessKernel)
	}
	v, err := p.Variables(t.Context(), b.sessKernel)
	if err != nil || len(v.Variables) != 1 || v.Variables[0].Name != "held" || v.Variables[0].Repr != quoted(b.owner) {
		t.Fatalf("after %s: %s's session variables = %+v, %v", after, b.owner, v, err)
	}
	res := run(t, p, Request{Session: b.session, Owner: b.owner, Code: "print(held)"})
	if res.Output != b.owner+"\n" || res.Kernel.ID != b.sessKernel || !res.Kernel.Reused {
		t.Fatalf("after %s: %s's session cell = %+v", after, b.owner, res)
	}
	res = run(t, p, Request{Owner: b.owner, Code: "print(held)"})
	if res.Output != "implicit\n" || res.Kernel.ID != b.implicit {
		t.Fatalf("after %s: %s's implicit cell = %+v", after, b.owner, res)
	}
}

// TestOwnerOperationsLeaveOtherOwnersAlone: with two owners live, each
// operation on one owner's kernel or session (kill by id, interrupt by id
// and by owner, variables, session restart and delete, owner shutdown)
// acts on that owner's alone: the other's kernels keep their processes,
// state and session, and its running cell runs on.
func TestOwnerOperationsLeaveOtherOwnersAlone(t *testing.T) {
	p := newTestPool(t)
	bob := newBystander(t, p, "bob")
	alice := mustSession(t, p, SessionSpec{Owner: "alice"})
	run(t, p, Request{Session: alice.ID, Owner: "alice", Code: "mine = 1"})

	// Kill by id.
	victim := run(t, p, Request{Owner: "alice", Mode: "m", Code: "pass"}).Kernel.ID
	if err := p.Kill(victim); err != nil {
		t.Fatal(err)
	}
	bob.check(t, p, "kill by id")

	// Variables list the kernel's own names only.
	aliceKernel, err := p.SessionKernel(alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := p.Variables(t.Context(), aliceKernel); err != nil || len(v.Variables) != 1 || v.Variables[0].Name != "mine" {
		t.Fatalf("alice's variables = %+v, %v", v, err)
	}

	// Interrupt by id, and by owner (of one mode, then of every mode),
	// while bob's cell runs: it is never interrupted.
	bobBusy := startBlocker(t, p, t.Context(), Request{Owner: "bob", Mode: "busy"})
	for _, interrupt := range []struct {
		name string
		do   func(aliceBusy string) []string
	}{
		{"interrupt by id", func(id string) []string {
			if err := p.Interrupt(id); err != nil {
				t.Fatal(err)
			}
			return []string{id}
		}},
		{"interrupt alice's busy mode", func(string) []string { return p.InterruptOwner("alice", "busy") }},
		{"interrupt alice", func(string) []string { return p.InterruptOwner("alice", "") }},
	} {
		b := startBlocker(t, p, t.Context(), Request{Owner: "alice", Mode: "busy"})
		id := p.byOwnerModeForTest("alice", "busy")
		if got := p.InterruptOwner("alice", "m"); len(got) != 0 {
			t.Fatalf("interrupting alice's mode m interrupted %v (her busy kernel is of mode busy)", got)
		}
		if got := interrupt.do(id); !slices.Equal(got, []string{id}) {
			t.Fatalf("%s interrupted %v, want only alice's %s", interrupt.name, got, id)
		}
		wantStatus(t, b.wait(t), StatusInterrupted)
	}
	bobBusy.let(t)
	if res := bobBusy.wait(t); res.Status != StatusSuccess || !strings.HasSuffix(res.Output, "released\n") {
		t.Fatalf("bob's cell, running while alice's were interrupted: %+v", res)
	}
	bob.check(t, p, "alice's interrupts")

	// A session's restart and delete end that session's kernel only.
	if gone, err := p.RestartSession(alice.ID); err != nil || gone != aliceKernel {
		t.Fatalf("RestartSession = %q, %v; want %s", gone, err, aliceKernel)
	}
	bob.check(t, p, "alice's session restart")
	run(t, p, Request{Session: alice.ID, Owner: "alice", Code: "mine = 2"})
	if err := p.DeleteSession(alice.ID); err != nil {
		t.Fatal(err)
	}
	bob.check(t, p, "alice's session delete")

	// The owner's shutdown takes every kernel and session of alice's, and
	// none of bob's.
	again := mustSession(t, p, SessionSpec{Owner: "alice"})
	run(t, p, Request{Session: again.ID, Owner: "alice", Code: "pass"})
	if n := p.ShutdownOwner("alice"); n != 2 {
		t.Fatalf("ShutdownOwner(alice) = %d, want 2 (its session and busy kernels)", n)
	}
	if _, err := p.Session(again.ID); err == nil {
		t.Fatal("alice's session outlived her shutdown")
	}
	bob.check(t, p, "alice's shutdown")
	if got := p.Sessions(nil); len(got) != 1 || got[0].ID != bob.session {
		t.Fatalf("sessions after alice's shutdown: %+v", got)
	}
}

// byOwnerModeForTest is the id of owner's live kernel of mode ("" none).
func (p *Pool) byOwnerModeForTest(owner, mode string) string {
	for _, k := range p.List() {
		if k.Owner == owner && k.Mode == mode && k.Session == "" {
			return k.ID
		}
	}
	return ""
}
