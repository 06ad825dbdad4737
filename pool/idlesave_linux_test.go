package pool

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// idleSaved waits for owner's idle save to be stored and returns its
// description.
func idleSaved(t *testing.T, p *Pool, owner string, gen uint64) CheckpointInfo {
	t.Helper()
	var got CheckpointInfo
	waitFor(t, owner+"'s idle save", func() bool {
		for _, c := range p.Checkpoints() {
			if c.Owner == owner && c.Generation == gen {
				got = c
				return true
			}
		}
		return false
	})
	if got.Reason != string(reasonIdleSave) {
		t.Fatalf("checkpoint %+v: want reason %q", got, reasonIdleSave)
	}
	return got
}

// idleSaveRunning reports whether an idle save of owner's kernel runs.
func idleSaveRunning(p *Pool, owner string) bool {
	lv := liveOf(p, owner)
	p.mu.Lock()
	defer p.mu.Unlock()
	return lv != nil && lv.idleDone != nil
}

// TestIdleSaveMakesEvictionInstant: a persist kernel idle for
// checkpoint_idle is saved once; an unchanged kernel is not saved again;
// evicting it then saves nothing (no kernel is left saving) and its
// owner's next kernel restores the idle save.
func TestIdleSaveMakesEvictionInstant(t *testing.T) {
	p := newPersistPool(t, func(c *Config) {
		c.MaxKernels = 1
		c.Checkpoints.Idle = 100 * time.Millisecond
	})
	run(t, p, Request{Owner: "a", Code: "x = 41\nimport threading\nlk = threading.Lock()"})
	info := idleSaved(t, p, "a", 1)
	if info.Names != 2 || info.Lost != 1 {
		t.Fatalf("idle save = %+v", info)
	}
	// Due by time but unchanged: no save starts.
	p.startIdleSaves(time.Now().Add(time.Hour))
	if idleSaveRunning(p, "a") {
		t.Fatal("an unchanged kernel was saved again")
	}
	run(t, p, Request{Owner: "b", Code: "pass"}) // evicts a: nothing to save
	if st := p.Stats(); st.Evicted != 1 || st.KernelsSaving != 0 {
		t.Fatalf("stats after evicting a saved kernel: %+v", st)
	}
	if infos := p.Checkpoints(); len(infos) != 1 || infos[0].Generation != 1 || infos[0].Reason != string(reasonIdleSave) {
		t.Fatalf("checkpoints after the eviction = %+v (want the idle save, not a new one)", infos)
	}
	res := run(t, p, Request{Owner: "a", Code: "x + 1"})
	if res.Output != "42\n" || !res.Kernel.Restored || strings.Join(res.Lost, ",") != "lk" || !strings.Contains(res.Warning, "(saved while idle)") {
		t.Fatalf("a's next cell: %+v", res)
	}
}

// TestIdleSaveInterruptedByCell: a cell that arrives while its kernel's
// idle save runs (here a save that would sleep 30 s) interrupts the save
// and runs on the same, living kernel with its state.
func TestIdleSaveInterruptedByCell(t *testing.T) {
	p := newPersistPool(t, func(c *Config) {
		c.Checkpoints.Idle = 100 * time.Millisecond
		c.Checkpoints.Timeout = 2 * time.Minute // the idle save is never cut short by its timeout
	})
	first := run(t, p, Request{Owner: "a", Code: slowReduceCell(30)})
	lv := liveOf(p, "a")
	// Close would save the slow kernel for 30 s, and a cell left waiting
	// for the save would wait as long: a failed test kills it first.
	t.Cleanup(func() { _ = lv.k.Kill() })
	waitFor(t, "the idle save to start", func() bool { return idleSaveRunning(p, "a") })
	// The cell interrupts the save as it enters the slot (under the
	// pool's lock): once it is in, the save was told, not left to end.
	var interrupted atomic.Bool
	p.mu.Lock()
	cancel := lv.idleCancel
	lv.idleCancel = func() { interrupted.Store(true); cancel() }
	p.mu.Unlock()
	start := time.Now()
	resc := make(chan *Result, 1)
	go func() {
		res, err := p.Execute(context.Background(), Request{Owner: "a", Code: "kept"})
		if err != nil {
			t.Errorf("the cell after the idle save: %v", err)
		}
		resc <- res
	}()
	t.Cleanup(func() { // the kill ends a save the cell may wait for
		_ = lv.k.Kill()
		<-resc
	})
	waitFor(t, "the cell to enter its slot", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return slotUsers(p, "a") > 0 || lv.idleCancel == nil
	})
	if !interrupted.Load() {
		t.Fatal("a cell entered the slot and the idle save was not interrupted")
	}
	res := <-resc
	resc <- res // for the cleanup
	t.Logf("the cell that interrupted a 30 s idle save took %v", time.Since(start))
	if res == nil {
		t.FailNow()
	}
	if res.Output != "'v'\n" || res.Kernel.ID != first.Kernel.ID || !res.Kernel.Reused {
		t.Fatalf("cell after the interrupted idle save: %+v", res)
	}
	if infos := p.Checkpoints(); len(infos) != 0 {
		t.Fatalf("an interrupted idle save stored %+v", infos)
	}
	// Close would save the slow kernel for 30 s: it goes first.
	_ = lv.k.Kill()
}

// slotUsers is the number of callers on owner's default slot (under
// p.mu).
func slotUsers(p *Pool, owner string) int {
	for k, s := range p.slots {
		if k.owner == owner {
			return s.users
		}
	}
	return 0
}

// TestIdleSaveKillDrops: a kill loses the kernel's state, as it did
// before idle saves: what its idle save stored goes with it.
func TestIdleSaveKillDrops(t *testing.T) {
	p := newPersistPool(t, func(c *Config) { c.Checkpoints.Idle = 100 * time.Millisecond })
	first := run(t, p, Request{Owner: "a", Code: "x = 1"})
	idleSaved(t, p, "a", 1)
	if err := p.Kill(first.Kernel.ID); err != nil {
		t.Fatal(err)
	}
	if infos := p.Checkpoints(); len(infos) != 0 {
		t.Fatalf("checkpoints after kill = %+v", infos)
	}
	if res := run(t, p, Request{Owner: "a", Code: "'x' in globals()"}); res.Output != "False\n" || res.Kernel.Restored {
		t.Fatalf("after kill: %+v", res)
	}
}

// TestIdleSaveRestoresAfterCrash: node A saved an idle owner and then
// went away without a shutdown (its kernel never saved again); node B,
// another state dir over the same store, restores the owner's state.
func TestIdleSaveRestoresAfterCrash(t *testing.T) {
	mk := sharedStorePools(t, 100*time.Millisecond)
	a := mk()
	run(t, a, Request{Owner: "o", Code: "x = 'before the crash'"})
	idleSaved(t, a, "o", 1)
	b := mk()
	if res := run(t, b, Request{Owner: "o", Code: "x"}); res.Output != "'before the crash'\n" || !res.Kernel.Restored {
		t.Fatalf("on node B: %+v", res)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// sharedStorePools makes persist pools (nodes) that share one local
// checkpoint store, with idle saves after idle (-1: off).
func sharedStorePools(t *testing.T, idle time.Duration) func() *Pool {
	shared, err := NewLocalCheckpointStore(testTempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return func() *Pool {
		return newTestPool(t, func(c *Config) {
			c.Policies = map[string]CellPolicy{defaultName: {Persist: true}}
			c.Checkpoints.Store = shared
			c.Checkpoints.Idle = idle
		})
	}
}

// TestIdleSaveRefusedAtCommitLeavesUnsaved: a namespace whose pickle fits
// the owner's cap but not with the checkpoint's header is refused when
// the idle save commits. The kernel's state then still counts as unsaved
// (a drain waits for it), so its eviction tries the save again and the
// owner's next cell reports that one's refusal.
func TestIdleSaveRefusedAtCommitLeavesUnsaved(t *testing.T) {
	const capBytes = 1 << 20
	p := newPersistPool(t, func(c *Config) {
		c.MaxKernels = 1
		c.Checkpoints.Idle = time.Hour // started by hand below
		c.Checkpoints.MaxBytesPerOwner = capBytes
	})
	// A 1 MiB - 200 B blob pickles to about 100 B more, under the cap
	// less the trailer; its header of some 200 B takes it over.
	run(t, p, Request{Owner: "a", Code: "blob = bytes((1 << 20) - 200)"})
	p.startIdleSaves(time.Now().Add(2 * time.Hour))
	waitFor(t, "a's idle save to end", func() bool { return !idleSaveRunning(p, "a") })
	infos := p.Checkpoints()
	if len(infos) != 1 || infos[0].Reason != string(reasonIdleSave) || !strings.Contains(infos[0].Refused, "over the 1048576-byte cap") {
		t.Fatalf("checkpoints after the idle save = %+v; want its refusal at commit", infos)
	}
	if !p.OwnerUnsaved("a") || p.PendingSaves() != 1 {
		t.Fatalf("after a refused idle save: unsaved %v, pending saves %d; want a's kernel still unsaved", p.OwnerUnsaved("a"), p.PendingSaves())
	}
	run(t, p, Request{Owner: "b", Code: "pass"}) // evicts a, whose save is refused again
	waitSaved(t, p)
	next := run(t, p, Request{Owner: "a", Code: "'blob' in globals()"})
	if next.Output != "False\n" || !strings.Contains(next.Warning, "stopped (evicted) and its state was not saved: the checkpoint (") {
		t.Fatalf("a's next cell: %+v", next)
	}
}
