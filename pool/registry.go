package pool

import (
	"context"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/kernpool/kernpool/kernel"
)

// teardownReason is why the pool tore a kernel down: logged, mapped onto an
// EndReason (endReasonOf), and for kills by others reported to the cell
// that was running.
type teardownReason string

// Teardown reasons.
const (
	reasonReset       teardownReason = "reset"
	reasonDead        teardownReason = "dead"
	reasonTimeout     teardownReason = "timeout"
	reasonCanceled    teardownReason = "canceled"
	reasonDied        teardownReason = "died"
	reasonOOM         teardownReason = "out of memory"
	reasonExit        teardownReason = "exit"
	reasonProtocol    teardownReason = "protocol error"
	reasonEvicted     teardownReason = "evicted"
	reasonReaped      teardownReason = "idle"
	reasonKilled      teardownReason = "killed"
	reasonOwner       teardownReason = "owner shutdown"
	reasonClosed      teardownReason = "pool closed"
	reasonInterrupted teardownReason = "interrupted past its grace"
	reasonSpare       teardownReason = "spare not used"
	reasonFenced      teardownReason = "placed under a newer generation"
	// reasonIdleSave is not a teardown: it is what an idle save's header
	// says stopped the kernel when a crash ends it before a teardown.
	reasonIdleSave teardownReason = "saved while idle"
)

// slot is the registry entry of one key. It outlives the kernels it holds
// only while callers wait on it: a key whose kernel is gone and that no
// caller uses is removed from the map.
type slot struct {
	key   key
	tools []string
	// sem serializes the key's cells: whoever holds it may run a cell on
	// live, or replace live (spawn, reset). Waiting on it respects ctx.
	sem chan struct{}

	// The fields below are guarded by Pool.mu.

	// users counts callers holding or waiting for sem; a slot with users
	// > 0 is busy and is never evicted or reaped.
	users int
	// lastUsed orders eviction and drives idle reaping.
	lastUsed time.Time
	// removed: the slot left the registry; a caller that then obtains sem
	// starts over with a fresh slot.
	removed bool
	// doom says who killed the kernel under a running cell (Kill,
	// ShutdownOwner, Close), so that cell reports "interrupted".
	doom teardownReason
	// live is the current kernel, nil before the first spawn and after a
	// teardown.
	live *live
	// refill: the slot claimed a spare; its first caller's leave wakes
	// the refiller.
	refill bool
}

// live is one started kernel with what the pool attached to it.
type live struct {
	k           *kernel.Kernel
	key         key // the key it was bound to (set by restore, under Pool.mu)
	id          string
	owner, mode string
	pid, uid    int
	tools       ToolServer // nil without tools
	limits      Limits     // the request's limits it was started with
	passthrough []string   // sorted passthrough names it was started with
	filter      OutputFilter
	// secrets are the values filter masks besides the RPC token (scrubbed
	// environment, request env); masked and maskedBytes count the request env values
	// among them added by cells (env.go).
	secrets     []string
	masked      int
	maskedBytes int
	startedAt   time.Time
	isolation   kernel.Isolation // fixed at spawn
	// execCount is the kernel's cell counter after its last cell (Pool.mu).
	execCount int
	// betweenSeen is the kernel's between-cells drop count at its last
	// cell (takeBetween; only the goroutine running its cell touches it).
	betweenSeen int64
	once        sync.Once

	// Warm spares (spares.go), guarded by Pool.mu. spare: started for no
	// owner and not bound yet (owner is set when it is claimed); interp is
	// the interpreter's stat when it started; claimed is closed when it
	// leaves the ready spares; counted: in the observer's spare gauge;
	// observed: the observer was told it started; down: teardown began.
	spare, counted, observed, down bool
	interp                         os.FileInfo
	claimed                        chan struct{}

	// saveDone is closed once a checkpoint save marked for the kernel
	// (markSaveLocked, under Pool.mu) finished; nil when none is. async:
	// that save runs off the request path and counts in Pool.savingN.
	saveDone chan struct{}
	async    bool

	// Checkpoint generations (persist.go, idlesave.go), under Pool.mu.
	// gen is the generation of the key the kernel restored or last
	// stored; cells counts the cells it ran, storedCells the count whose
	// state the store holds (-1: none). idleDone is closed when an idle
	// save in flight ends, idleCancel interrupts it.
	gen                uint64
	wrote              bool // the kernel stored a generation
	cells, storedCells int
	idleTried          int // cells at the last idle save's start
	idleDone           chan struct{}
	idleCancel         context.CancelFunc
}

// takeBetween returns the output lv's kernel dropped between cells since
// the last call; called once per cell, which runs alone on its kernel.
func (lv *live) takeBetween() int64 {
	n := lv.k.DroppedOutput()
	d := n - lv.betweenSeen
	lv.betweenSeen = n
	return d
}

// doomed is a kernel taken out of the registry, to be torn down outside the lock.
type doomed struct {
	lv     *live
	reason teardownReason
}

// isolationReport is a copy of what is enforced for the kernel.
func (lv *live) isolationReport() *kernel.Isolation {
	is := lv.isolation
	is.Namespaces = append([]string{}, is.Namespaces...)
	return &is
}

// dead reports whether the kernel process has ended (it never blocks).
func (lv *live) dead() bool {
	select {
	case <-lv.k.Done():
		return true
	default:
		return false
	}
}

// enter registers a caller on the slot of k, creating it (within the cap)
// when needed, and reaps idle kernels on the way, as the reference does on
// every acquire. The returned doomed kernels must be torn down by the caller.
func (p *Pool) enter(k key, tools []string) (*slot, []doomed, error) {
	return p.enterFor(k, tools, nil)
}

// enterFor is enter that, for a new key of rq, claims a warm spare as the
// slot's kernel (bound by executeOn before the key's first cell).
func (p *Pool) enterFor(k key, tools []string, rq *normalized) (*slot, []doomed, error) {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return nil, nil, ErrClosed
	}
	now := time.Now()
	if !p.liveSessionLocked(k, now) {
		p.mu.Unlock()
		return nil, nil, sessionNotFound("session", k.session)
	}
	gone := p.reapLocked(now)
	s := p.slots[k]
	var claimed *live
	if s == nil {
		if err := p.kernelQuotaLocked(k.owner, now); err != nil {
			p.mu.Unlock()
			return nil, gone, err
		}
		var stale []doomed
		claimed, stale = p.claimSpareLocked(rq)
		gone = append(gone, stale...)
		if claimed == nil {
			evicted, err := p.makeRoomLocked()
			gone = append(gone, evicted...)
			if err != nil {
				p.mu.Unlock()
				return nil, gone, err
			}
		}
		s = &slot{key: k, tools: tools, sem: make(chan struct{}, 1), live: claimed, refill: claimed != nil}
		p.slots[k] = s
		if claimed != nil {
			p.byID[claimed.id] = s
		}
	}
	s.interruptIdleSaveLocked() // a cell wants the kernel
	s.users++
	p.users++
	s.lastUsed = now
	p.mu.Unlock()
	if claimed != nil {
		p.obs.SparesChanged(claimed.mode, -1)
	}
	return s, gone, nil
}

// leave unregisters a caller of s; the last caller removes a slot without
// a kernel, and the last caller of a closing pool signals the drain.
func (p *Pool) leave(s *slot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.refill {
		// The spare this slot claimed is replaced once the claiming call
		// is done, so the replacement's start does not compete with the
		// key's first cell for the CPU.
		s.refill = false
		p.kickRefill()
	}
	s.users--
	s.lastUsed = time.Now()
	p.dropUnusedLocked(s)
	p.users--
	if p.users == 0 && p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
}

// removeLocked takes s out of the registry; doom is reported to a cell
// still running on it ("" when its own caller removes it).
func (p *Pool) removeLocked(s *slot, doom teardownReason) {
	if s.removed {
		return
	}
	s.removed = true
	s.doom = doom
	p.markSaveLocked(s, doom)
	delete(p.slots, s.key)
	if s.live != nil {
		delete(p.byID, s.live.id)
	}
}

// dropUnusedLocked takes s out of the registry when it holds no kernel
// and no caller uses it.
func (p *Pool) dropUnusedLocked(s *slot) {
	if s.users == 0 && s.live == nil && !s.removed {
		p.removeLocked(s, "")
	}
}

// detachLocked clears lv from s (if it is still s's kernel).
func (p *Pool) detachLocked(s *slot, lv *live) {
	if s.live == lv {
		s.live = nil
		delete(p.byID, lv.id)
	}
}

// reapLocked removes every idle slot whose kernel has not run a cell for
// IdleTimeout and returns their kernels.
func (p *Pool) reapLocked(now time.Time) []doomed {
	var out []doomed
	for _, s := range p.slots {
		if s.users == 0 && s.live != nil && now.Sub(s.lastUsed) > p.cfg.IdleTimeout {
			out = append(out, doomed{s.live, reasonReaped})
			p.removeLocked(s, reasonReaped)
			p.stats.Reaped++
		}
	}
	return out
}

// makeRoomLocked evicts idle kernels (of any owner) until one more slot
// fits under MaxKernels: spares first, then kernels whose state the store
// holds already (nothing to save), then the least recently used. A busy
// slot is never evicted, and neither is one that needs a save while
// MaxKernels saves run already: when nothing is evictable the caller gets
// ErrCapacity. A victim that needs a save is saved off the caller's path
// (markSaveLocked), so its save never delays the caller's cell.
func (p *Pool) makeRoomLocked() ([]doomed, error) {
	spares := p.spareCountLocked()
	excess := len(p.slots) + spares + 1 - p.cfg.MaxKernels
	if excess <= 0 {
		return nil, nil
	}
	var idle []*slot
	for _, s := range p.slots {
		if s.users == 0 {
			idle = append(idle, s)
		}
	}
	// Kernels that need no save first, then least recently used; a kernel
	// that needs a save is a victim only while saves in flight stay under
	// MaxKernels. Chosen before anything is stopped, so a refusal stops
	// nothing.
	slices.SortFunc(idle, func(a, b *slot) int {
		if na, nb := p.needsSaveLocked(a), p.needsSaveLocked(b); na != nb {
			if nb {
				return -1
			}
			return 1
		}
		return a.lastUsed.Compare(b.lastUsed)
	})
	need := excess - min(spares, excess)
	saves := p.savingN
	var victims []*slot
	for _, s := range idle {
		if len(victims) == need {
			break
		}
		if p.needsSaveLocked(s) {
			if saves >= p.cfg.MaxKernels {
				continue
			}
			saves++
		}
		victims = append(victims, s)
	}
	if len(victims) < need {
		p.stats.CapacityRefusals++
		return nil, ErrCapacity
	}
	// Spares first: no owner loses anything.
	out := p.evictSparesLocked(excess)
	for _, s := range victims {
		if s.live != nil {
			out = append(out, doomed{s.live, reasonEvicted})
		}
		p.removeLocked(s, reasonEvicted)
		p.stats.Evicted++
	}
	return out, nil
}

// needsSaveLocked: evicting s's kernel would save it.
func (p *Pool) needsSaveLocked(s *slot) bool {
	lv := s.live
	return lv != nil && lv.key != (key{}) && p.policy(lv.key.mode).Persist && !lv.cleanLocked()
}

// teardown kills lv's process tree, closes its tool server and logs why.
// Safe to call from several goroutines; the first call does the work and
// the others wait for it.
func (p *Pool) teardown(lv *live, reason teardownReason) {
	lv.once.Do(func() {
		// A spare's tool server is attached by its bind, which may run now.
		p.mu.Lock()
		lv.down = true
		tools, counted, observed, owner := lv.tools, lv.counted, lv.observed, lv.owner
		lv.counted = false
		p.mu.Unlock()
		p.saveCheckpoint(lv, reason)
		if err := lv.k.Kill(); err != nil {
			p.log.Warn("kernel kill failed", "id", lv.id, "owner", owner, "error", err)
		}
		if reason == reasonKilled {
			p.dropStoredState(lv)
		}
		if tools != nil {
			if err := tools.Close(); err != nil {
				p.log.Warn("tool server close failed", "id", lv.id, "error", err)
			}
		}
		p.removeSpillDir(lv.id)
		p.log.Info("kernel stopped", "id", lv.id, "owner", owner, "mode", lv.mode, "pid", lv.pid, "reason", reason)
		if observed {
			p.obs.KernelEnded(lv.mode, endReasonOf(reason))
		}
		if counted {
			p.obs.SparesChanged(lv.mode, -1)
		}
		p.kickRefill() // room under MaxKernels
	})
}

// endReasonOf maps a teardown reason (log and interrupt text) onto its
// EndReason.
func endReasonOf(reason teardownReason) EndReason {
	switch reason {
	case reasonReaped:
		return EndIdle
	case reasonEvicted:
		return EndLRU
	case reasonOOM:
		return EndOOM
	case reasonTimeout:
		return EndTimeout
	case reasonCanceled, reasonInterrupted:
		return EndInterrupt
	case reasonExit:
		return EndExit
	case reasonKilled, reasonOwner, reasonClosed, reasonFenced:
		return EndShutdown
	case reasonReset:
		return EndReset
	}
	return EndCrash // died, dead, protocol error
}

// teardownAll tears kernels down in parallel and returns when all are
// gone, except those whose save runs off the caller's path (an eviction's
// or the reaper's): they go on in the background, and Close waits for
// them.
func (p *Pool) teardownAll(list []doomed) {
	var wg sync.WaitGroup
	for _, d := range list {
		if d.lv.async {
			go func() {
				defer p.bgSaves.Done()
				p.teardown(d.lv, d.reason)
			}()
			continue
		}
		wg.Go(func() { p.teardown(d.lv, d.reason) })
	}
	wg.Wait()
}
