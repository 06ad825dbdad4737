package pool

import (
	"context"
	"time"
)

// Idle saves (docs/design.md, "Checkpoint store"): a persist kernel that
// has run no cell for Checkpoints.Idle is saved in the background, once
// per change, so that a node that crashes loses at most the work since,
// and evicting the kernel later needs no save at all. An idle save holds
// the slot's semaphore like a cell; a cell that arrives interrupts it.

// idlePeriod is how often the idle saver looks for kernels due.
func idlePeriod(idle time.Duration) time.Duration {
	return min(max(idle/4, 10*time.Millisecond), 5*time.Second)
}

// idleSaver starts the idle saves due until Close.
func (p *Pool) idleSaver() {
	defer p.idle.Done()
	if p.cfg.Checkpoints.Idle < 0 {
		return
	}
	t := time.NewTicker(idlePeriod(p.cfg.Checkpoints.Idle))
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			p.startIdleSaves(now)
		}
	}
}

// startIdleSaves starts a save of every kernel idle for Checkpoints.Idle
// whose state changed since its last save (or its last attempt).
func (p *Pool) startIdleSaves(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return
	}
	for _, s := range p.slots {
		lv := s.live
		if s.users != 0 || lv == nil || lv.key == (key{}) || lv.down || lv.saveDone != nil || lv.idleDone != nil ||
			now.Sub(s.lastUsed) < p.cfg.Checkpoints.Idle || lv.storedCells == lv.cells || lv.idleTried == lv.cells ||
			!p.policy(lv.key.mode).Persist {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Checkpoints.Timeout)
		done := make(chan struct{})
		lv.idleDone, lv.idleCancel, lv.idleTried = done, cancel, lv.cells
		// A new kernel of the key, a reset and an owner shutdown wait
		// for it as for any save (waitSave, dropOwnerCheckpoints).
		if p.saving[lv.key] == nil {
			p.saving[lv.key] = done
		}
		p.idle.Add(1)
		go p.idleSave(ctx, s, lv)
	}
}

// idleSave saves lv's state unless a cell holds the slot.
func (p *Pool) idleSave(ctx context.Context, s *slot, lv *live) {
	defer p.idle.Done()
	p.mu.Lock()
	done, cancel := lv.idleDone, lv.idleCancel
	p.mu.Unlock()
	defer func() {
		cancel()
		p.mu.Lock()
		lv.idleDone, lv.idleCancel = nil, nil
		if p.saving[lv.key] == done {
			delete(p.saving, lv.key)
		}
		p.mu.Unlock()
		close(done)
	}()
	select {
	case s.sem <- struct{}{}:
	default:
		return // a cell has the kernel: it is not idle
	}
	defer func() { <-s.sem }()
	if ctx.Err() != nil || lv.dead() {
		return
	}
	start := time.Now()
	if p.storeState(ctx, lv, reasonIdleSave, false) {
		p.log.Debug("idle checkpoint stored", "id", lv.id, "owner", lv.owner, "duration", time.Since(start))
	}
}

// interruptIdleSaveLocked ends an idle save of s's kernel: a cell wants
// the kernel.
func (s *slot) interruptIdleSaveLocked() {
	if s.live != nil && s.live.idleCancel != nil {
		s.live.idleCancel()
	}
}

// dropStoredState removes what idle saves of lv stored, for the stops
// that lose a kernel's state (kill): the key's next kernel starts empty,
// as it did before idle saves.
func (p *Pool) dropStoredState(lv *live) {
	p.forgetMasksWhere(func(k key) bool { return k == lv.key })
	p.mu.Lock()
	done := lv.idleDone
	p.mu.Unlock()
	if done != nil {
		<-done
	}
	p.mu.Lock()
	stored, gen := lv.wrote, lv.gen
	p.mu.Unlock()
	if stored {
		p.ckpt.remove(lv.key, gen)
	}
}
