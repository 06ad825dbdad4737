package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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
	// Timeout bounds one save or one restore (default 60s).
	Timeout time.Duration
}

// savesOn reports whether a teardown for reason checkpoints the kernel:
// only the pool's own stops do; a kill, reset, owner shutdown or death
// loses the state as before.
func savesOn(reason teardownReason) bool {
	return reason == reasonEvicted || reason == reasonReaped || reason == reasonClosed
}

// markSaveLocked registers the coming save of s's kernel, so that a new
// kernel of the key waits for it before restoring.
func (p *Pool) markSaveLocked(s *slot, doom teardownReason) {
	lv := s.live
	// A kernel not yet bound to a key (a spare, or one not past restore)
	// has no state of its key to save.
	if lv == nil || lv.key == (key{}) || lv.saveDone != nil || !savesOn(doom) || !p.policy(lv.key.mode).Persist {
		return
	}
	lv.saveDone = make(chan struct{})
	p.saving[lv.key] = lv.saveDone
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
		p.countSaveLocked(ok)
		p.mu.Unlock()
		close(lv.saveDone)
	}()
	if lv.dead() {
		return
	}
	start := time.Now()
	k := lv.key
	h := &ckptHeader{Owner: k.owner, Mode: k.mode, Interpreter: k.interpreter, Cwd: k.cwd, Tools: k.tools, SavedAt: start, Reason: string(reason)}
	f, err := p.ckpt.create(k)
	if err != nil {
		p.log.Error("checkpoint not saved", "id", lv.id, "owner", lv.owner, "error", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Checkpoints.Timeout)
	defer cancel()
	saved, err := lv.k.SaveCheckpoint(ctx, p.ckpt.room(k), f)
	if saved != nil {
		h.SavedTotal, h.Lost, h.LostTotal = saved.SavedTotal, saved.Lost, saved.LostTotal
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		note := "saving it failed: " + err.Error()
		var big *kernel.CheckpointTooBigError
		if errors.As(err, &big) {
			note = fmt.Sprintf("it pickles to %d bytes, over the %d bytes left under the owner's %d-byte checkpoint cap (checkpoint_max_bytes_per_owner)",
				big.Size, big.Limit, p.cfg.Checkpoints.MaxBytesPerOwner)
		}
		p.log.Warn("checkpoint refused", "id", lv.id, "owner", lv.owner, "mode", lv.mode, "reason", note)
		if err := p.ckpt.refuse(k, h, note); err != nil {
			p.log.Error("checkpoint refusal not stored", "id", lv.id, "error", err)
		}
		return
	}
	h.Size = saved.Size
	if saved.SavedTotal == 0 && saved.LostTotal == 0 {
		_ = f.Close()
		_ = os.Remove(f.Name())
		ok = true
		return // nothing to restore
	}
	note, err := p.ckpt.commit(f, k, h)
	switch {
	case err != nil:
		p.log.Error("checkpoint not saved", "id", lv.id, "owner", lv.owner, "error", err)
	case note != "":
		p.log.Warn("checkpoint refused", "id", lv.id, "owner", lv.owner, "mode", lv.mode, "reason", note)
	default:
		ok = true
		p.log.Info("checkpoint saved", "id", lv.id, "owner", lv.owner, "mode", lv.mode, "reason", reason,
			"bytes", saved.Size, "names", saved.SavedTotal, "lost", saved.LostTotal, "duration", time.Since(start))
	}
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
	p.mu.Unlock()
	if rq.reset {
		if p.waitSave(ctx, k) {
			p.ckpt.remove(k)
		}
		return nil
	}
	if !p.policy(k.mode).Persist || !p.waitSave(ctx, k) {
		return nil
	}
	f, h, err := p.ckpt.open(k)
	if err != nil {
		p.log.Warn("checkpoint not loaded", "owner", k.owner, "mode", k.mode, "error", err)
		return nil
	}
	if f == nil {
		return nil
	}
	defer func() {
		_ = f.Close()
		p.ckpt.remove(k) // consumed: a restore that failed is not retried
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
	loaded, err := lv.k.RestoreCheckpoint(rctx, io.LimitReader(f, h.Size))
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
