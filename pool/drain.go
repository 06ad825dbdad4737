package pool

import (
	"context"
	"time"
)

// A drain (the daemon's POST /v1/drain) closes the pool and reports its
// progress from these figures: what is still to be saved, and the
// CheckpointsSaved and CheckpointsFailed counters of PoolStats.

// PendingSaves counts what closing the pool still has to checkpoint: the
// live kernels of modes with Persist that are bound to a key (a spare
// has no state of a key; a session's is not saved at close, sessions.go)
// and changed since the store last took them (markSaveLocked saves no
// clean kernel), plus the saves in flight (an idle save among them: its
// kernel counts there, once).
func (p *Pool) PendingSaves() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.saving)
	for _, s := range p.slots {
		lv := s.live
		if lv == nil || lv.key == (key{}) || lv.saveDone != nil || !p.policy(lv.key.mode).Persist || lv.key.session != "" {
			continue
		}
		if lv.cleanLocked() || lv.idleDone != nil && p.saving[lv.key] == lv.idleDone {
			continue
		}
		n++
	}
	return n
}

// countSaveLocked counts the end of one marked save.
func (p *Pool) countSaveLocked(ok bool) {
	if ok {
		p.stats.CheckpointsSaved++
	} else {
		p.stats.CheckpointsFailed++
	}
}

// DefaultOwner is the owner of a request that names none.
const DefaultOwner = defaultName

// OwnerOf returns the owner of the live kernel id, for a caller that may
// act for some owners only (the API's network listener); false for a
// spare (no owner yet) or no such kernel.
func (p *Pool) OwnerOf(id string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.byID[id]
	if s == nil || s.live == nil {
		return "", false
	}
	return s.key.owner, true
}

// ownerSavePoll is how often WaitOwnerSaved looks again while the
// owner's kernels wait for their save to begin (Close lets the other
// running cells finish first).
const ownerSavePoll = 20 * time.Millisecond

// OwnerUnsaved reports whether the pool holds state of owner that the
// store may lack and that a close would save: a persist kernel of the
// owner run since its last save, one of its cells running or queued,
// or a save of it in flight. A fleet's draining node keeps the owner's
// routers waiting while it does (docs/fleet.md, "Drain in a fleet").
func (p *Pool) OwnerUnsaved(owner string) bool {
	if owner == "" {
		owner = defaultName
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ownerUnsavedLocked(owner)
}

func (p *Pool) ownerUnsavedLocked(owner string) bool {
	for k := range p.saving {
		if k.owner == owner {
			return true
		}
	}
	for k, s := range p.slots {
		if k.owner != owner || k.session != "" || !p.policy(k.mode).Persist {
			continue
		}
		if lv := s.live; s.users > 0 || lv != nil && lv.key != (key{}) && lv.saveDone == nil && !lv.cleanLocked() {
			return true
		}
	}
	return false
}

// WaitOwnerSaved returns once OwnerUnsaved(owner) is false (the pool
// saved the owner's state, or failed to and counted it), or with ctx's
// error.
func (p *Pool) WaitOwnerSaved(ctx context.Context, owner string) error {
	if owner == "" {
		owner = defaultName
	}
	for {
		p.mu.Lock()
		if !p.ownerUnsavedLocked(owner) {
			p.mu.Unlock()
			return nil
		}
		var wait <-chan struct{}
		for k, ch := range p.saving {
			if k.owner == owner {
				wait = ch
				break
			}
		}
		p.mu.Unlock()
		var tick <-chan time.Time
		if wait == nil {
			tick = time.After(ownerSavePoll)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		case <-tick:
		}
	}
}
