package pool

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Explicit sessions and request environments with real kernels.

func mustSession(t *testing.T, p *Pool, spec SessionSpec) SessionInfo {
	t.Helper()
	info, err := p.CreateSession(spec)
	if err != nil {
		t.Fatalf("CreateSession(%+v): %v", spec, err)
	}
	return info
}

// TestSessionBoundToItsOwner: two owners' sessions live at once; one's id
// is no session for the other, and a session's kernel is never the
// implicit kernel of the same parameters.
func TestSessionBoundToItsOwner(t *testing.T) {
	p := newTestPool(t)
	alice := mustSession(t, p, SessionSpec{Owner: "alice"})
	bob := mustSession(t, p, SessionSpec{Owner: "bob"})
	if len(alice.ID) != 33 || alice.ID[0] != 's' || alice.ID == bob.ID || alice.KernelID != "" {
		t.Fatalf("sessions = %+v, %+v", alice, bob)
	}
	wantStatus(t, run(t, p, Request{Session: alice.ID, Code: "who = 'alice'"}), StatusSuccess)
	wantStatus(t, run(t, p, Request{Session: bob.ID, Owner: "bob", Code: "who = 'bob'"}), StatusSuccess)
	_, err := p.Execute(t.Context(), Request{Session: alice.ID, Owner: "bob", Code: "print(who)"})
	if !errors.Is(err, ErrSessionNotFound) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob using alice's session: %v, want ErrSessionNotFound", err)
	}
	res := run(t, p, Request{Session: alice.ID, Owner: "alice", Code: "print(who)"})
	if res.Output != "alice\n" || res.Kernel.ExecutionCount != 2 {
		t.Fatalf("alice's second cell = %+v", res)
	}
	implicit := run(t, p, Request{Owner: "alice", Code: "print('who' in globals())"})
	if implicit.Output != "False\n" || implicit.Kernel.ID == res.Kernel.ID {
		t.Fatalf("alice's implicit kernel = %+v (session kernel %s)", implicit, res.Kernel.ID)
	}
	info, err := p.Session(alice.ID)
	if err != nil || info.KernelID != res.Kernel.ID || info.Owner != "alice" {
		t.Fatalf("Session = %+v, %v", info, err)
	}
	if id, err := p.SessionKernel(alice.ID); err != nil || id != res.Kernel.ID {
		t.Fatalf("SessionKernel = %q, %v", id, err)
	}
	if got := p.Sessions(func(o string) bool { return o == "bob" }); len(got) != 1 || got[0].ID != bob.ID {
		t.Fatalf("bob's sessions = %+v", got)
	}
	var sessOf string
	for _, k := range p.List() {
		if k.ID == res.Kernel.ID {
			sessOf = k.Session
		}
	}
	if sessOf != alice.ID {
		t.Fatalf("ps shows session %q for alice's session kernel", sessOf)
	}
	pid := pidOf(t, p, res.Kernel.ID)
	if err := p.DeleteSession(alice.ID); err != nil {
		t.Fatal(err)
	}
	assertDead(t, pid)
	if _, err := p.Execute(t.Context(), Request{Session: alice.ID, Code: "1"}); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("execute on a deleted session: %v", err)
	}
	if err := p.DeleteSession(alice.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	// The owner's shutdown ends its sessions.
	p.ShutdownOwner("bob")
	if _, err := p.Session(bob.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob's session after his shutdown: %v", err)
	}
}

// TestSessionSurvivesEviction: with persist on, a session whose kernel is
// evicted keeps its id, and its next cell restores its state on a new
// kernel; a restart loses the state and keeps the session.
func TestSessionSurvivesEviction(t *testing.T) {
	p := newPersistPool(t, func(c *Config) { c.MaxKernels = 1 })
	s := mustSession(t, p, SessionSpec{Owner: "a", Env: map[string]string{"SESS_ENV": "kept"}})
	first := run(t, p, Request{Session: s.ID, Code: "x = 41"})
	run(t, p, Request{Owner: "other", Code: "y = 1"}) // evicts the session's kernel
	waitSaved(t, p)
	if info, err := p.Session(s.ID); err != nil || info.KernelID != "" {
		t.Fatalf("session after eviction = %+v, %v", info, err)
	}
	if _, err := p.SessionKernel(s.ID); !errors.Is(err, ErrIdle) {
		t.Fatalf("SessionKernel after eviction: %v", err)
	}
	res := run(t, p, Request{Session: s.ID, Code: "import os\nprint(x + 1, os.environ['SESS_ENV'])"})
	if res.Output != "42 kept\n" || !res.Kernel.Restored || res.Kernel.ID == first.Kernel.ID {
		t.Fatalf("after eviction: %+v", res)
	}
	killed, err := p.RestartSession(s.ID)
	if err != nil || killed != res.Kernel.ID {
		t.Fatalf("RestartSession = %q, %v", killed, err)
	}
	res = run(t, p, Request{Session: s.ID, Code: "print('x' in globals())"})
	if res.Output != "False\n" || res.Kernel.Restored {
		t.Fatalf("after restart: %+v", res)
	}
	if _, err := p.Execute(context.Background(), Request{Session: "s0000", Code: "1"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
}

// TestSessionBounds: max_sessions_per_owner and max_sessions refuse the
// create past them (ErrQuota); an ended session frees its place.
func TestSessionBounds(t *testing.T) {
	p := newTestPool(t, func(c *Config) { c.Sessions = SessionConfig{MaxSessions: 3, MaxSessionsPerOwner: 2} })
	a1 := mustSession(t, p, SessionSpec{Owner: "a"})
	mustSession(t, p, SessionSpec{Owner: "a"})
	if _, err := p.CreateSession(SessionSpec{Owner: "a"}); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), `owner "a" holds 2 sessions`) {
		t.Fatalf("a's third session: %v", err)
	}
	mustSession(t, p, SessionSpec{Owner: "b"})
	if _, err := p.CreateSession(SessionSpec{Owner: "c"}); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "holds 3 sessions") {
		t.Fatalf("the pool's fourth session: %v", err)
	}
	if err := p.DeleteSession(a1.ID); err != nil {
		t.Fatal(err)
	}
	mustSession(t, p, SessionSpec{Owner: "c"})
}

// TestSessionIdleExpiry: a session without a kernel that nobody used for
// session_idle_timeout ends by itself.
func TestSessionIdleExpiry(t *testing.T) {
	p := newTestPool(t, func(c *Config) {
		c.ReapInterval = 10 * time.Millisecond
		c.Sessions.IdleTimeout = time.Millisecond
	})
	s := mustSession(t, p, SessionSpec{Owner: "idle"})
	waitFor(t, "the idle session to end", func() bool {
		_, err := p.Session(s.ID)
		return errors.Is(err, ErrNotFound)
	})
}

// TestSessionDeletedDuringCell: deleting a session interrupts its running
// cell and leaves no kernel behind for it, also for a caller queued on it.
func TestSessionDeletedDuringCell(t *testing.T) {
	p := newTestPool(t)
	s := mustSession(t, p, SessionSpec{Owner: "d"})
	run(t, p, Request{Session: s.ID, Code: "x = 1"})
	type out struct {
		res *Result
		err error
	}
	running, queued := make(chan out, 1), make(chan out, 1)
	go func() {
		res, err := p.Execute(context.Background(), Request{Session: s.ID, Code: "import time\nwhile True: time.sleep(0.01)"})
		running <- out{res, err}
	}()
	waitFor(t, "the session's cell to run", func() bool {
		for _, k := range p.List() {
			if k.Session == s.ID && k.Busy {
				return true
			}
		}
		return false
	})
	go func() {
		res, err := p.Execute(context.Background(), Request{Session: s.ID, Code: "x"})
		queued <- out{res, err}
	}()
	waitFor(t, "the second caller to queue", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		sl := p.slots[key{owner: "d", mode: defaultName, interpreter: p.cfg.DefaultInterpreter, session: s.ID}]
		return sl != nil && sl.users == 2
	})
	if err := p.DeleteSession(s.ID); err != nil {
		t.Fatal(err)
	}
	if o := <-running; o.err != nil || o.res.Status != StatusInterrupted {
		t.Fatalf("the running cell: %+v, %v", o.res, o.err)
	}
	if o := <-queued; !errors.Is(o.err, ErrSessionNotFound) {
		t.Fatalf("the queued cell: %+v, %v", o.res, o.err)
	}
	for _, k := range p.List() {
		if k.Session == s.ID {
			t.Fatalf("a kernel of the deleted session lives: %+v", k)
		}
	}
}

// TestCloseDropsSessionCheckpoints: sessions end with the pool, so Close
// deletes their checkpoints (an evicted session kernel's) and does not
// save their live kernels.
func TestCloseDropsSessionCheckpoints(t *testing.T) {
	p := newPersistPool(t, func(c *Config) { c.MaxKernels = 2 })
	s := mustSession(t, p, SessionSpec{Owner: "a"})
	run(t, p, Request{Session: s.ID, Code: "x = 1"})
	run(t, p, Request{Owner: "b", Code: "y = 2"})
	run(t, p, Request{Owner: "c", Code: "z = 3"}) // evicts the session's kernel
	waitSaved(t, p)
	if n := len(ckptFiles(t, p)); n != 1 {
		t.Fatalf("%d checkpoints after the eviction, want the session's", n)
	}
	run(t, p, Request{Owner: "b", Code: "y"})
	s2 := mustSession(t, p, SessionSpec{Owner: "d"})
	run(t, p, Request{Session: s2.ID, Code: "w = 4"}) // evicts c (saved), s2's kernel is live at Close
	waitSaved(t, p)
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, c := range p.Checkpoints() {
		owners = append(owners, c.Owner)
	}
	if strings.Join(owners, ",") != "b,c" {
		t.Fatalf("checkpoints after Close: %v, want b's and c's only", owners)
	}
}
