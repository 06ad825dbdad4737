package pool

// A drain (the daemon's POST /v1/drain) closes the pool and reports its
// progress from these figures: what is still to be saved, and the
// CheckpointsSaved and CheckpointsFailed counters of PoolStats.

// PendingSaves counts what closing the pool still has to checkpoint: the
// live kernels of modes with Persist that are bound to a key (a spare
// has no state of a key; a session's is not saved at close, sessions.go),
// plus the saves in flight.
func (p *Pool) PendingSaves() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.saving)
	for _, s := range p.slots {
		lv := s.live
		if lv == nil || lv.key == (key{}) || lv.saveDone != nil || !p.policy(lv.key.mode).Persist || lv.key.session != "" {
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
