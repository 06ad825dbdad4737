package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kernpool/kernpool/kernel"
)

// Lossless eviction (docs/design.md): a kernel of a mode whose CellPolicy
// has Persist is checkpointed when the pool stops it for its own reasons
// (LRU eviction, idle reaping, Close on SIGTERM), and the next kernel of
// its key restores the checkpoint before the key's first cell.

// CheckpointConfig configures the checkpoint store. Zero fields take the
// defaults.
type CheckpointConfig struct {
	// MaxBytesPerOwner caps the bytes one owner's checkpoints take on disk
	// (default 256 MiB). A save that would pass it is refused, nothing is
	// kept but a note the owner's next kernel reports.
	MaxBytesPerOwner int64
	// Retention is how long a checkpoint is kept (default 24h); the idle
	// reaper's sweep removes older ones.
	Retention time.Duration
	// Timeout bounds one save or one restore (default 60s), and each
	// store operation.
	Timeout time.Duration
	// Idle is how long a persist kernel sits without a cell before the
	// pool saves it in the background (default 30s; negative: never), so
	// a crashed node loses at most the work since, and evicting it later
	// needs no save. A kernel is saved once per change.
	Idle time.Duration
	// Store keeps the checkpoints (nil: files under
	// <StateDir>/checkpoints). Stores shared by several daemons let an
	// owner's next kernel restore on any of them.
	Store CheckpointStore
}

// savesOn reports whether a teardown for reason checkpoints the kernel:
// only the pool's own stops do; a kill, reset, owner shutdown or death
// loses the state as before.
func savesOn(reason teardownReason) bool {
	return reason == reasonEvicted || reason == reasonReaped || reason == reasonClosed
}

// markSaveLocked registers the coming save of s's kernel, so that a new
// kernel of the key waits for it before restoring. An eviction's or
// reaper's save runs off the caller's path (teardownAll): the kernel then
// counts as "saving" until it is done.
func (p *Pool) markSaveLocked(s *slot, doom teardownReason) {
	lv := s.live
	// A kernel not yet bound to a key (a spare, or one not past restore)
	// has no state of its key to save; one the store holds already (an
	// idle save, nothing run since) needs none.
	if lv == nil || lv.key == (key{}) || lv.saveDone != nil || !savesOn(doom) || !p.policy(lv.key.mode).Persist || lv.cleanLocked() {
		return
	}
	if doom == reasonClosed && lv.key.session != "" {
		return // the session ends with the pool: nothing could restore it (sessions.go)
	}
	lv.saveDone = make(chan struct{})
	p.saving[lv.key] = lv.saveDone
	if doom == reasonEvicted || doom == reasonReaped {
		lv.async = true
		p.savingN++
		p.bgSaves.Add(1) // under mu, before Close (which sets closing under it) waits
	}
}

// cleanLocked: the store holds lv's state as it is now (an idle save
// stored it and no cell ran since, none is being saved).
func (lv *live) cleanLocked() bool {
	return lv.storedCells == lv.cells && lv.idleDone == nil
}

// waitSave waits for a save of k in flight (false when ctx ended first).
func (p *Pool) waitSave(ctx context.Context, k key) bool {
	p.mu.Lock()
	ch := p.saving[k]
	p.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// saveCheckpoint saves lv's namespace before its teardown, when a save was
// marked for it. A refused or failed save stores a note in its place.
func (p *Pool) saveCheckpoint(lv *live, reason teardownReason) {
	if lv.saveDone == nil {
		return
	}
	ok := false // counted for a drain's progress (PendingSaves, PoolStats)
	defer func() {
		p.mu.Lock()
		if p.saving[lv.key] == lv.saveDone {
			delete(p.saving, lv.key)
		}
		if lv.async {
			p.savingN--
		}
		p.countSaveLocked(ok)
		p.mu.Unlock()
		close(lv.saveDone)
	}()
	// An idle save of the kernel may still run: it ends first, and when
	// it stored the kernel's state there is nothing left to save.
	p.mu.Lock()
	idle := lv.idleDone
	p.mu.Unlock()
	if idle != nil {
		<-idle
	}
	p.mu.Lock()
	clean := lv.cleanLocked()
	p.mu.Unlock()
	if clean {
		ok = true // an idle save stored the kernel as it is
		return
	}
	if lv.dead() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Checkpoints.Timeout)
	defer cancel()
	ok = p.storeState(ctx, lv, reason, true)
}

// storeState saves lv's namespace as its key's next generation and
// reports whether the store then holds lv's state. With note, a refused
// or failed save stores a note in the checkpoint's place (the key's next
// kernel reports it); an idle save only logs, as the teardown's save
// will try again.
func (p *Pool) storeState(ctx context.Context, lv *live, reason teardownReason, note bool) bool {
	start := time.Now()
	k := lv.key
	p.mu.Lock()
	gen, cells := p.saveGenLocked(lv), lv.cells
	p.mu.Unlock()
	h := &ckptHeader{Owner: k.owner, Mode: k.mode, Interpreter: k.interpreter, Cwd: k.cwd, Tools: k.tools, Session: k.session, SavedAt: start, Reason: string(reason)}
	f, err := p.ckpt.create(k)
	if err != nil {
		p.log.Error("checkpoint not saved", "id", lv.id, "owner", lv.owner, "error", err)
		return false
	}
	saved, err := lv.k.SaveCheckpoint(ctx, p.ckpt.room(k), f, p.policy(k.mode).InterruptGrace)
	if saved != nil {
		h.SavedTotal, h.Lost, h.LostTotal = saved.SavedTotal, saved.Lost, saved.LostTotal
	}
	if err != nil {
		p.ckpt.discard(f)
		why := "saving it failed: " + err.Error()
		var big *kernel.CheckpointTooBigError
		if errors.As(err, &big) {
			why = fmt.Sprintf("it pickles to %d bytes, over the %d bytes left under the owner's %d-byte checkpoint cap (checkpoint_max_bytes_per_owner)",
				big.Size, big.Limit, p.cfg.Checkpoints.MaxBytesPerOwner)
		}
		p.log.Warn("checkpoint refused", "id", lv.id, "owner", lv.owner, "mode", lv.mode, "reason", why)
		if note {
			p.stored(lv, gen, -1, p.ckpt.refuse(k, h, why, gen))
		}
		return false
	}
	h.Size = saved.Size
	if saved.SavedTotal == 0 && saved.LostTotal == 0 {
		p.ckpt.discard(f)
		p.mu.Lock()
		lv.storedCells = cells // nothing to restore: nothing to save until a cell runs
		p.mu.Unlock()
		return true
	}
	why, err := p.ckpt.commit(f, k, h, gen)
	switch {
	case err != nil:
		p.stored(lv, gen, -1, err)
		return false
	case why != "":
		p.log.Warn("checkpoint refused", "id", lv.id, "owner", lv.owner, "mode", lv.mode, "reason", why)
		p.stored(lv, gen, -1, nil)
		return false
	}
	p.stored(lv, gen, cells, nil)
	p.touchMasks(k)
	p.log.Info("checkpoint saved", "id", lv.id, "owner", lv.owner, "mode", lv.mode, "reason", reason, "generation", gen,
		"bytes", saved.Size, "names", saved.SavedTotal, "lost", saved.LostTotal, "duration", time.Since(start))
	return true
}

// stored records that generation gen of lv's key was written (err nil):
// the kernel's next save writes gen+1, and cells >= 0 is the cell count
// whose state it holds. A stale generation means another kernel of the
// key saved a newer one: this kernel's state is dropped, never written
// over it.
func (p *Pool) stored(lv *live, gen uint64, cells int, err error) {
	switch {
	case errors.Is(err, ErrStaleGeneration):
		p.log.Warn("checkpoint dropped: the store holds a newer generation", "id", lv.id, "owner", lv.owner, "generation", gen, "error", err)
		return
	case err != nil:
		p.log.Error("checkpoint not saved", "id", lv.id, "owner", lv.owner, "store", p.ckpt.st.Describe(), "error", err)
		return
	}
	p.mu.Lock()
	lv.gen, lv.wrote = gen, true
	if cells >= 0 {
		lv.storedCells = cells
	}
	p.mu.Unlock()
}

// restoreNote is what a restore tells the key's first cell.
type restoreNote struct {
	restored, lost []string
	warning        string
}

// restore is the single restore point: lv was just bound to rq's key
// (spawned, or a spare claimed) and runs no cell yet. It records the key
// on lv (what a later save is filed under), loads the key's checkpoint
// into lv (waiting for a save in flight) and consumes it.
func (p *Pool) restore(ctx context.Context, lv *live, rq normalized) *restoreNote {
	k := rq.key
	p.mu.Lock()
	lv.key = k
	lv.storedCells, lv.idleTried = -1, -1 // the store holds none of this kernel's state yet
	p.mu.Unlock()
	p.seedMasks(lv, k, rq.reset)
	if rq.reset {
		if p.waitSave(ctx, k) {
			p.ckpt.remove(k, deleteAll)
		}
		return nil
	}
	if !p.policy(k.mode).Persist || !p.waitSave(ctx, k) {
		return nil
	}
	f, h, gen, err := p.ckpt.open(k)
	p.mu.Lock()
	lv.gen = gen // the kernel's saves come after what the store holds
	p.mu.Unlock()
	if err != nil {
		p.log.Warn("checkpoint not loaded", "owner", k.owner, "mode", k.mode, "store", p.ckpt.st.Describe(), "error", err)
		return nil
	}
	if f == nil {
		return nil
	}
	defer func() {
		_ = f.Close()
		// Consumed: a restore that failed is not retried. A newer
		// generation another node stored meanwhile stays.
		p.ckpt.remove(k, gen)
	}()
	switch {
	case time.Since(h.SavedAt) > p.ckpt.retention:
		return nil
	case h.Refused != "":
		return &restoreNote{warning: fmt.Sprintf("This session's previous kernel was stopped (%s) and its state was not saved: %s.", h.Reason, h.Refused)}
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, p.cfg.Checkpoints.Timeout)
	defer cancel()
	loaded, err := lv.k.RestoreCheckpoint(rctx, f, h.Size, p.policy(k.mode).InterruptGrace)
	if err != nil {
		p.log.Warn("checkpoint restore failed", "id", lv.id, "owner", k.owner, "error", err)
		return &restoreNote{warning: fmt.Sprintf("This session's previous kernel was stopped (%s); restoring its saved state failed (%s), so the kernel starts empty.", h.Reason, err)}
	}
	lost := slices.Concat(h.Lost, loaded.Lost)
	slices.Sort(lost)
	lost = slices.Compact(lost)
	p.log.Info("checkpoint restored", "id", lv.id, "owner", k.owner, "mode", k.mode,
		"names", loaded.RestoredTotal, "lost", len(lost), "duration", time.Since(start))
	n := &restoreNote{restored: loaded.Restored, lost: lost}
	if n.restored == nil {
		n.restored = []string{}
	}
	n.warning = fmt.Sprintf("This session's previous kernel was stopped (%s); its state was restored into a new kernel (%d names).", h.Reason, len(loaded.Restored))
	if len(lost) > 0 {
		n.warning += " Lost (could not be saved or restored, define them again): " + strings.Join(lost, ", ") + "."
	}
	return n
}

// apply reports the restore on the key's first Result.
func (n *restoreNote) apply(res *Result) {
	if n == nil || res == nil {
		return
	}
	if n.restored != nil {
		res.Kernel.Restored = true
		res.Restored, res.Lost = n.restored, n.lost
		if res.Lost == nil {
			res.Lost = []string{}
		}
	}
	if res.Warning != "" {
		res.Warning += " "
	}
	res.Warning += n.warning
}

// Checkpoints describes the stored checkpoints (for ps).
func (p *Pool) Checkpoints() []CheckpointInfo { return p.ckpt.list() }

// sweepCheckpoints removes expired checkpoints (the reaper calls it).
func (p *Pool) sweepCheckpoints(now time.Time) {
	if n := p.ckpt.sweep(now); n > 0 {
		p.log.Info("expired checkpoints removed", "count", n)
	}
}

// dropOwnerCheckpoints waits for the owner's saves in flight and deletes
// all of its checkpoints (owner shutdown).
func (p *Pool) dropOwnerCheckpoints(owner string) {
	p.mu.Lock()
	var wait []chan struct{}
	for k, ch := range p.saving {
		if k.owner == owner {
			wait = append(wait, ch)
		}
	}
	p.mu.Unlock()
	for _, ch := range wait {
		<-ch
	}
	if n := p.ckpt.removeOwner(owner); n > 0 {
		p.log.Info("owner checkpoints removed", "owner", owner, "count", n)
	}
}
