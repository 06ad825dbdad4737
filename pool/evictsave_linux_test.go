package pool

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
)

// slowReduceCell defines an object whose pickling sleeps for secs
// seconds: saving its kernel's namespace takes that long.
func slowReduceCell(secs int) string {
	return "import time\nclass Slow:\n    def __reduce__(self):\n        time.sleep(" + strconv.Itoa(secs) + ")\n        return (int, (0,))\nslow = Slow()\nkept = 'v'\n"
}

// liveOf returns the kernel of owner's default key (under the lock).
func liveOf(p *Pool, owner string) *live {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, s := range p.slots {
		if k.owner == owner {
			return s.live
		}
	}
	return nil
}

// TestEvictionDoesNotWaitForVictimSave: the victim's save sleeps 30 s in
// its pickling; the evicting owner's first cell completes while that
// save is still running, and under 1 s later than the slower of two cold
// starts in the same run (both asserted: issue 21's figure). Ending the
// victim then fails its save, and its owner's next cell says so.
func TestEvictionDoesNotWaitForVictimSave(t *testing.T) {
	p := newPersistPool(t, func(c *Config) {
		c.MaxKernels = 3
		c.Checkpoints.Timeout = 2 * time.Minute // the save is never cut short here
		c.Checkpoints.Idle = -1                 // the eviction's own save is what is measured
	})
	wantStatus(t, run(t, p, Request{Owner: "victim", Code: slowReduceCell(30)}), StatusSuccess)
	victim := liveOf(p, "victim")
	// The floor: a new owner's first cell with room in the pool (a cold
	// start, no eviction), measured in the same run, the slower of two: a
	// loaded host's noise must not land on the floor's side alone.
	var floor time.Duration
	for _, owner := range []string{"floor-a", "floor-b"} {
		start := time.Now()
		wantStatus(t, run(t, p, Request{Owner: owner, Code: "1 + 1"}), StatusSuccess)
		floor = max(floor, time.Since(start))
	}

	res, took := evictingCell(t, p, "requester", victim) // evicts victim, the least recently used
	st := p.Stats()
	wantStatus(t, res, StatusSuccess)
	if res.Output != "2\n" || st.Evicted != 1 {
		t.Fatalf("requester: %+v, stats %+v", res, st)
	}
	// The save was still running when the requester's cell had finished.
	if st.KernelsSaving != 1 || len(p.Checkpoints()) != 0 {
		t.Fatalf("after the requester's cell: %d saving, checkpoints %+v; want the victim's save still in flight", st.KernelsSaving, p.Checkpoints())
	}
	t.Logf("the evicting request's first cell took %v while the victim's save sleeps 30 s; a first cell without eviction took %v (ratio %.2f)",
		took, floor, took.Seconds()/floor.Seconds())
	// Issue 21's figure, the one timing this suite asserts: the eviction
	// adds under 1 s to the requester's first cell. The order above only
	// shows it waited less than the 30 s save (a bounded wait of a few
	// seconds passed it). Against a cold start of the same run, since a
	// loaded host stretches the cold start itself past 1 s.
	if extra := took - floor; extra >= time.Second {
		t.Errorf("the evicting request's first cell took %v, %v more than a first cell without eviction (%v); want under 1 s more",
			took, extra, floor)
	}
	// End the 30 s sleep: the save fails and leaves a note, as a save
	// past checkpoint_timeout does.
	_ = victim.k.Kill()
	waitSaved(t, p)
	next := run(t, p, Request{Owner: "victim", Code: "'kept' in globals()"})
	if next.Output != "False\n" || !strings.Contains(next.Warning, "its state was not saved: saving it failed") {
		t.Fatalf("victim's next cell: %+v", next)
	}
}

// evictingCell runs owner's first cell ("1 + 1") aside and, once it
// evicted a kernel, checks at once that the victim counts as saving: its
// save runs off the cell's path (one on it would hold the cell 30 s). It
// returns the cell's result and how long it took. A failed test kills the
// victim, ending a save the cell may wait for.
func evictingCell(t *testing.T, p *Pool, owner string, victim *live) (*Result, time.Duration) {
	t.Helper()
	type outcome struct {
		res  *Result
		took time.Duration
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		res, err := p.Execute(context.Background(), Request{Owner: owner, Code: "1 + 1"})
		if err != nil {
			t.Errorf("%s's cell: %v", owner, err)
		}
		done <- outcome{res, time.Since(start)}
	}()
	received := false
	t.Cleanup(func() {
		if !received {
			_ = victim.k.Kill()
			<-done
		}
	})
	waitFor(t, "the victim's eviction", func() bool { return p.Stats().Evicted == 1 })
	if st := p.Stats(); st.KernelsSaving != 1 {
		t.Fatalf("the victim evicted: %d saving; want its save running off %s's path", st.KernelsSaving, owner)
	}
	o := <-done
	received = true
	if o.res == nil {
		t.FailNow()
	}
	return o.res, o.took
}

// TestEvictionSaveOverTimeoutLeavesNote: a victim whose save runs past
// checkpoint_timeout leaves a note its owner's next cell reports. (That
// the requester does not wait for the save is
// TestEvictionDoesNotWaitForVictimSave's: here the 1 s timeout can end
// the save before a loaded host has started the requester's kernel.)
func TestEvictionSaveOverTimeoutLeavesNote(t *testing.T) {
	p := newPersistPool(t, func(c *Config) {
		c.MaxKernels = 1
		c.Checkpoints.Timeout = time.Second
		c.Checkpoints.Idle = -1
	})
	wantStatus(t, run(t, p, Request{Owner: "victim", Code: slowReduceCell(30)}), StatusSuccess)
	wantStatus(t, run(t, p, Request{Owner: "requester", Code: "pass"}), StatusSuccess)
	waitSaved(t, p)
	if st := p.Stats(); st.Evicted != 1 || st.CheckpointsFailed != 1 || st.CheckpointsSaved != 0 {
		t.Fatalf("stats %+v: want the victim evicted and its save failed", st)
	}
	infos := p.Checkpoints()
	if len(infos) != 1 || infos[0].Owner != "victim" || !strings.Contains(infos[0].Refused, "saving it failed") {
		t.Fatalf("checkpoints = %+v", infos)
	}
	next := run(t, p, Request{Owner: "victim", Code: "'kept' in globals()"})
	if next.Output != "False\n" || !strings.Contains(next.Warning, "its state was not saved") {
		t.Fatalf("victim's next cell: %+v", next)
	}
}

// TestEvictionSavingBounded: kernels being saved count toward a bound of
// MaxKernels: with as many saves in flight, a request that would need
// one more is refused with ErrCapacity (503 with Retry-After over the
// API) instead of growing the pool without bound.
func TestEvictionSavingBounded(t *testing.T) {
	p := newPersistPool(t, func(c *Config) {
		c.MaxKernels = 1
		c.Checkpoints.Timeout = 2 * time.Minute
		c.Checkpoints.Idle = -1
	})
	wantStatus(t, run(t, p, Request{Owner: "v1", Code: slowReduceCell(30)}), StatusSuccess)
	v1 := liveOf(p, "v1")
	// A failed test: Close would wait for their 30 s saves.
	t.Cleanup(func() { _ = v1.k.Kill() })
	wantStatus(t, run(t, p, Request{Owner: "v2", Code: slowReduceCell(30)}), StatusSuccess) // v1 saving
	v2 := liveOf(p, "v2")
	t.Cleanup(func() { _ = v2.k.Kill() })
	_, err := p.Execute(context.Background(), Request{Owner: "v3", Code: "pass"})
	if !isCapacity(err) {
		t.Fatalf("third owner with one save in flight and max_kernels 1: %v, want ErrCapacity", err)
	}
	if st := p.Stats(); st.KernelsSaving != 1 || st.CapacityRefusals != 1 {
		t.Fatalf("stats %+v", st)
	}
	_ = v1.k.Kill()
	_ = v2.k.Kill()
	waitSaved(t, p)
}

func isCapacity(err error) bool {
	return err != nil && strings.Contains(err.Error(), ErrCapacity.Error())
}

// TestStoreLateSaveDropped: two pools ran one owner at once (a network
// partition); the one that saves second saves the generation the first
// already stored, and the store keeps the first's: a late save of an
// older generation never overwrites a newer one.
func TestStoreLateSaveDropped(t *testing.T) {
	mk := sharedStorePools(t, -1)
	a, b := mk(), mk()
	run(t, a, Request{Owner: "o", Code: "x = 'from a'"})
	run(t, b, Request{Owner: "o", Code: "x = 'from b'"})
	if err := a.Close(context.Background()); err != nil { // stores generation 1
		t.Fatal(err)
	}
	if err := b.Close(context.Background()); err != nil { // generation 1 again: dropped
		t.Fatal(err)
	}
	c := mk()
	infos := c.Checkpoints()
	if len(infos) != 1 || infos[0].Generation != 1 {
		t.Fatalf("checkpoints = %+v", infos)
	}
	if res := run(t, c, Request{Owner: "o", Code: "x"}); res.Output != "'from a'\n" || !res.Kernel.Restored {
		t.Fatalf("restored: %+v", res)
	}
}

// TestReapedSaveRunsOffTheReaper: a reaped kernel's save runs in the
// background as an evicted one's does: it counts in KernelsSaving (and so
// toward the bound on saves in flight) from the reap on, and the
// reaper's step returns while the save (30 s of pickling) still runs.
// The reaper's step is called here at a time past the idle timeout, so
// nothing waits for a tick.
func TestReapedSaveRunsOffTheReaper(t *testing.T) {
	p := newPersistPool(t, func(c *Config) {
		c.IdleTimeout = time.Hour // the reaper goroutine reaps nothing itself
		c.Checkpoints.Timeout = 2 * time.Minute
		c.Checkpoints.Idle = -1
	})
	wantStatus(t, run(t, p, Request{Owner: "a", Code: slowReduceCell(30)}), StatusSuccess)
	lv := liveOf(p, "a")
	p.mu.Lock()
	gone := p.reapLocked(time.Now().Add(2 * time.Hour))
	p.mu.Unlock()
	if st := p.Stats(); st.Reaped != 1 || st.KernelsSaving != 1 {
		t.Errorf("after the reap: %+v; want 1 reaped and its save counted in flight", st)
		_ = lv.k.Kill() // lets a synchronous save end at once
	}
	p.teardownAll(gone)
	if st := p.Stats(); st.KernelsSaving != 1 && !t.Failed() {
		t.Errorf("the reaper's step returned with %d kernels saving; want the reaped kernel's save still in flight", st.KernelsSaving)
	}
	_ = lv.k.Kill() // ends the 30 s pickling: the save fails
	waitSaved(t, p)
	next := run(t, p, Request{Owner: "a", Code: "'kept' in globals()"})
	if next.Output != "False\n" || !strings.Contains(next.Warning, "its state was not saved: saving it failed") {
		t.Fatalf("a's next cell: %+v", next)
	}
}

// TestShutdownOwnerDropsItsSavedState: shutting an owner down removes its
// checkpoints, and logs how many, without waiting for another owner's
// save; a save of its own still in flight is waited for, so the state
// does not come back once the shutdown has returned.
func TestShutdownOwnerDropsItsSavedState(t *testing.T) {
	var logs testenv.SyncBuffer
	p := newPersistPool(t, func(c *Config) {
		c.MaxKernels = 1
		c.Checkpoints.Timeout = 2 * time.Minute
		c.Checkpoints.Idle = -1
		c.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs})
	})
	run(t, p, Request{Owner: "a", Code: "x = 1"})
	wantStatus(t, run(t, p, Request{Owner: "c", Code: slowReduceCell(30)}), StatusSuccess) // evicts a
	waitSaved(t, p)
	c := liveOf(p, "c")
	run(t, p, Request{Owner: "d", Code: "pass"}) // evicts c: its save sleeps 30 s
	owners := func() (out []string) {
		for _, info := range p.Checkpoints() {
			out = append(out, info.Owner)
		}
		return out
	}
	// a's shutdown ends at once: waiting for c's save (30 s) is the bug,
	// seen as soon as it parks on that save rather than after it.
	doneA := make(chan int, 1)
	go func() { doneA <- p.ShutdownOwner("a") }()
	n, returned := 0, false
	waitFor(t, "a's shutdown to end or to wait on a save", func() bool {
		select {
		case n = <-doneA:
			returned = true
			return true
		default:
			return parkedIn("(*Pool).dropOwnerCheckpoints", "chan receive")
		}
	})
	if !returned {
		_ = c.k.Kill()
		<-doneA
		t.Fatal("ShutdownOwner(a) waits for c's save in flight")
	}
	if n != 0 {
		t.Errorf("ShutdownOwner(a) = %d, want 0 (a has no live kernel)", n)
	}
	if got, st := owners(), p.Stats(); len(got) != 0 || st.KernelsSaving != 1 {
		t.Errorf("after shutting a down: checkpoints of %v, %d saving; want none, and c's save still in flight", got, st.KernelsSaving)
	}
	if got := logLines(&logs, "owner checkpoints removed"); len(got) != 1 || got[0] != "owner checkpoints removed: owner=a count=1" {
		t.Errorf("log lines %q; want one for a's 1 checkpoint", got)
	}
	// c's own save is still running: its shutdown waits for it (the kill
	// ends it: a note is stored) and then removes what it stored.
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.ShutdownOwner("c")
	}()
	_ = c.k.Kill()
	<-done
	if got := owners(); len(got) != 0 {
		t.Errorf("after shutting c down: checkpoints of %v; want none", got)
	}
	p.ShutdownOwner("nobody")
	if got := logLines(&logs, "owner checkpoints removed"); len(got) != 2 || got[1] != "owner checkpoints removed: owner=c count=1" {
		t.Errorf("log lines %q; want a's and c's, none for an owner without checkpoints", got)
	}
}

// parkedIn reports whether a goroutine is blocked in state (as its trace
// header says: "chan receive") with fn on its stack.
func parkedIn(fn, state string) bool {
	for _, g := range testenv.Goroutines() {
		if strings.Contains(g, "["+state) && strings.Contains(g, fn+"(") {
			return true
		}
	}
	return false
}
