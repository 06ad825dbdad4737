package pool

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// What a drain reports (PendingSaves, the checkpoint counters) and what a
// fleet's draining node waits for per owner (OwnerUnsaved,
// WaitOwnerSaved), with real sandboxed kernels: the owners' kernels of a
// persist mode, beside a mode that does not persist ("plain") and an
// explicit session, neither of which a close saves.

// newDrainPool is a persist pool with a "plain" mode that does not
// persist, and idle saves left to the test (startIdleSaves with a time
// an hour ahead): the reaper's own never comes due.
func newDrainPool(t *testing.T, mods ...func(*Config)) *Pool {
	t.Helper()
	sandboxes, state := newRealIsolator(t)
	return newTestPool(t, append([]func(*Config){func(c *Config) {
		c.StateDir, c.Sandboxes = state, plainAsDefault{sandboxes}
		c.Policies = map[string]CellPolicy{defaultName: {Persist: true, InterruptGrace: testenv.Patience}, "plain": {}}
		c.Checkpoints.Idle = time.Hour
	}}, mods...)...)
}

// plainAsDefault sandboxes the "plain" mode's kernels in the default
// profile: the real isolator knows no other.
type plainAsDefault struct{ SandboxFactory }

func (f plainAsDefault) NewSandbox(id, owner, mode string, limits Limits) (kernel.Sandbox, error) {
	if mode == "plain" {
		mode = defaultName
	}
	return f.SandboxFactory.NewSandbox(id, owner, mode, limits)
}

// idleSaveAll saves every changed kernel as an idle save would and waits
// until no save is left in flight.
func idleSaveAll(t *testing.T, p *Pool) {
	t.Helper()
	p.startIdleSaves(time.Now().Add(2 * time.Hour))
	waitFor(t, "the idle saves", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.saving) == 0
	})
}

// drainOwners starts the kernels every test here begins with: owners a
// and b in the persist mode, c in "plain" only, and d with a session of
// the persist mode only, each of which ran one cell.
func drainOwners(t *testing.T, p *Pool) {
	t.Helper()
	for _, req := range []Request{{Owner: "a", Code: "x = 1"}, {Owner: "b", Code: "y = 2"}, {Owner: "c", Mode: "plain", Code: "z = 3"}} {
		wantStatus(t, run(t, p, req), StatusSuccess)
	}
	d := mustSession(t, p, SessionSpec{Owner: "d"})
	wantStatus(t, run(t, p, Request{Owner: "d", Session: d.ID, Code: "w = 4"}), StatusSuccess)
}

// TestPendingSavesCountsWhatCloseSaves: a drain's "remaining" counts the
// kernels the pool's close will save: the two persist kernels (a, b) but
// not the plain one (c) nor the session (d); once b is stored by an idle
// save and only a ran a cell since, one. Close then saves exactly that
// one (CheckpointsSaved 1, none failed) and nothing is left to save.
func TestPendingSavesCountsWhatCloseSaves(t *testing.T) {
	p := newDrainPool(t)
	drainOwners(t, p)
	if n := p.PendingSaves(); n != 2 {
		t.Fatalf("PendingSaves with a, b unsaved = %d, want 2", n)
	}
	idleSaveAll(t, p)
	if n := p.PendingSaves(); n != 0 {
		t.Fatalf("PendingSaves with every kernel stored = %d, want 0", n)
	}
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "x += 1"}), StatusSuccess)
	if n := p.PendingSaves(); n != 1 {
		t.Fatalf("PendingSaves with a changed since its save = %d, want 1", n)
	}
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.CheckpointsSaved != 1 || st.CheckpointsFailed != 0 || p.PendingSaves() != 0 {
		t.Fatalf("after Close: saved %d, failed %d, pending %d; want 1, 0, 0", st.CheckpointsSaved, st.CheckpointsFailed, p.PendingSaves())
	}
}

// TestCheckpointCountersOfEvictions: each eviction's save counts once in
// CheckpointsSaved (a drain's "saved"), a failed one in CheckpointsFailed.
func TestCheckpointCountersOfEvictions(t *testing.T) {
	p := newDrainPool(t, func(c *Config) { c.MaxKernels = 1 })
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "x = 1"}), StatusSuccess)
	wantStatus(t, run(t, p, Request{Owner: "b", Code: "y = 2"}), StatusSuccess) // evicts a
	waitSaved(t, p)
	if st := p.Stats(); st.CheckpointsSaved != 1 || st.CheckpointsFailed != 0 {
		t.Fatalf("after one eviction: saved %d, failed %d; want 1, 0", st.CheckpointsSaved, st.CheckpointsFailed)
	}
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "x"}), StatusSuccess) // evicts b
	waitSaved(t, p)
	if st := p.Stats(); st.CheckpointsSaved != 2 || st.CheckpointsFailed != 0 {
		t.Fatalf("after two evictions: saved %d, failed %d; want 2, 0", st.CheckpointsSaved, st.CheckpointsFailed)
	}
}

// TestOwnerUnsavedPerOwner: an owner's state is unsaved while one of its
// persist kernels ran a cell since its last save, and only its own
// kernels count: not another owner's, not a plain mode's nor a
// session's (a close saves neither). "" is the default owner.
func TestOwnerUnsavedPerOwner(t *testing.T) {
	p := newDrainPool(t)
	drainOwners(t, p)
	wantStatus(t, run(t, p, Request{Code: "v = 5"}), StatusSuccess) // the default owner
	check := func(when string, want map[string]bool) {
		t.Helper()
		for owner, unsaved := range want {
			if got := p.OwnerUnsaved(owner); got != unsaved {
				t.Errorf("%s: OwnerUnsaved(%q) = %v, want %v", when, owner, got, unsaved)
			}
		}
	}
	check("after one cell each", map[string]bool{"a": true, "b": true, "c": false, "d": false, "": true, DefaultOwner: true, "nobody": false})
	idleSaveAll(t, p)
	check("after the idle saves", map[string]bool{"a": false, "b": false, "c": false, "d": false, "": false})
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "x += 1"}), StatusSuccess)
	check("after a's next cell", map[string]bool{"a": true, "b": false, "c": false, "d": false, "": false})
}

// doneProbe is a context that says when its Done is first asked for:
// WaitOwnerSaved asks only once it found the owner unsaved and waits.
type doneProbe struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func (c *doneProbe) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}

// waitingForSave starts WaitOwnerSaved(owner) and returns once it waits
// (its result comes on the channel); it fails the test if it returned at
// once, with what (why it should have waited).
func waitingForSave(t *testing.T, p *Pool, owner, what string) <-chan error {
	t.Helper()
	bounded, stop := context.WithTimeout(t.Context(), testenv.Patience)
	t.Cleanup(stop)
	probe := &doneProbe{Context: bounded, asked: make(chan struct{})}
	waited := make(chan error, 1)
	go func() { waited <- p.WaitOwnerSaved(probe, owner) }()
	select {
	case <-probe.asked: // it found the owner unsaved and waits
	case err := <-waited:
		t.Fatalf("WaitOwnerSaved(%s) with %s returned at once: %v", owner, what, err)
	}
	return waited
}

// TestWaitOwnerSavedEndsWithTheState: WaitOwnerSaved returns at once for
// an owner with nothing unsaved, with ctx's error while the owner's
// state is unsaved ("" naming the default owner), and nil once nothing
// is left unsaved even when no save ended it (a kill loses the state:
// nothing is left for a save to wait for).
func TestWaitOwnerSavedEndsWithTheState(t *testing.T) {
	p := newDrainPool(t)
	wantStatus(t, run(t, p, Request{Code: "v = 5"}), StatusSuccess)
	a := run(t, p, Request{Owner: "a", Code: "x = 1"})
	wantStatus(t, a, StatusSuccess)
	wantStatus(t, run(t, p, Request{Owner: "c", Mode: "plain", Code: "z = 3"}), StatusSuccess)

	ended, cancel := context.WithCancel(t.Context())
	cancel()
	for owner, want := range map[string]error{"a": context.Canceled, "": context.Canceled, "c": nil, "nobody": nil} {
		if err := p.WaitOwnerSaved(ended, owner); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("WaitOwnerSaved(%q) with an ended ctx = %v, want %v", owner, err, want)
		}
	}

	waited := waitingForSave(t, p, "a", "a unsaved")
	if err := p.Kill(a.Kernel.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("WaitOwnerSaved after a's kernel was killed = %v, want nil", err)
	}
}

// TestPendingSavesCountsAnIdleSaveOnce: a kernel whose idle save is in
// flight (its pickling sleeps) is one save to wait for, not two.
func TestPendingSavesCountsAnIdleSaveOnce(t *testing.T) {
	p := newDrainPool(t)
	wantStatus(t, run(t, p, Request{Owner: "a", Code: slowReduceCell(3600)}), StatusSuccess)
	p.startIdleSaves(time.Now().Add(2 * time.Hour))
	waitFor(t, "a's idle save", func() bool { return idleSaveRunning(p, "a") })
	if n := p.PendingSaves(); n != 1 {
		t.Errorf("PendingSaves with a's idle save in flight = %d, want 1", n)
	}
	_ = liveOf(p, "a").k.Kill() // ends the save's hour-long sleep
	waitFor(t, "the idle save's end", func() bool { return !idleSaveRunning(p, "a") })
}

// TestOwnerUnsavedWhileItsEvictionSaves: an evicted kernel's save in
// flight keeps its owner unsaved, and only its owner, though the kernel
// left the pool; WaitOwnerSaved waits for that save, not another owner's
// (b's, still saving), and returns once it ended (here failed: counted
// in CheckpointsFailed, not Saved).
func TestOwnerUnsavedWhileItsEvictionSaves(t *testing.T) {
	p := newDrainPool(t, func(c *Config) {
		c.MaxKernels = 2
		c.Checkpoints.Timeout = 2 * time.Hour // the saves end when the test kills their kernels
	})
	wantStatus(t, run(t, p, Request{Owner: "a", Code: slowReduceCell(3600)}), StatusSuccess)
	wantStatus(t, run(t, p, Request{Owner: "b", Code: slowReduceCell(3600)}), StatusSuccess)
	va, vb := liveOf(p, "a"), liveOf(p, "b")
	defer func() { _, _ = va.k.Kill(), vb.k.Kill() }() // a failed test's close need not wait for their hour-long saves
	// c's cell (evicting a) runs until c is shut down: busy, c is no
	// candidate when d's cell needs room, and b is evicted (an idle plain
	// kernel would go first: it needs no save).
	busy := make(chan outcome, 1)
	go func() {
		res, err := p.Execute(t.Context(), Request{Owner: "c", Mode: "plain", Code: "import time\ntime.sleep(3600)"})
		busy <- outcome{res, err}
	}()
	waitFor(t, "c's cell evicting a", func() bool { st := p.Stats(); return st.Evicted == 1 && st.KernelsBusy == 1 })
	wantStatus(t, run(t, p, Request{Owner: "d", Mode: "plain", Code: "1"}), StatusSuccess) // evicts b
	defer func() {
		p.ShutdownOwner("c")
		if o := <-busy; o.err != nil || o.res.Status != StatusInterrupted {
			t.Errorf("c's cell after its owner's shutdown: %+v, %v", o.res, o.err)
		}
	}()
	if st := p.Stats(); st.KernelsSaving != 2 || st.Evicted != 2 || liveOf(p, "a") != nil || liveOf(p, "b") != nil {
		t.Fatalf("stats %+v: want a and b evicted and saving", st)
	}
	for owner, want := range map[string]bool{"a": true, "b": true, "nobody": false} {
		if got := p.OwnerUnsaved(owner); got != want {
			t.Errorf("OwnerUnsaved(%q) with a's and b's saves in flight = %v, want %v", owner, got, want)
		}
	}
	waited := waitingForSave(t, p, "a", "a's save in flight")
	_ = va.k.Kill() // ends a's save's hour-long pickling: it fails
	if err := <-waited; err != nil {
		t.Fatalf("WaitOwnerSaved after a's save ended = %v, want nil", err)
	}
	if st := p.Stats(); st.CheckpointsSaved != 0 || st.CheckpointsFailed != 1 || st.KernelsSaving != 1 || p.OwnerUnsaved("a") || !p.OwnerUnsaved("b") {
		t.Fatalf("after a's failed save: %+v, a unsaved %v; want 0 saved, 1 failed, b still saving", st, p.OwnerUnsaved("a"))
	}
	_ = vb.k.Kill()
	waitSaved(t, p)
}
