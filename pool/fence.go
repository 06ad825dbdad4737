package pool

import (
	"errors"
	"fmt"
)

// Placement fencing (docs/fleet.md, "Fencing"). A fleet's router places
// each owner on one node under a placement generation that grows by one
// at every move, and sends it with every request of the owner. A node
// refuses a generation older than one it has seen for the owner (a
// router that read the record before a move), and when a newer one
// arrives it drops the owner's kernels without saving them: the owner
// was placed elsewhere and back, and its state is the store's, not what
// this node's kernels hold from before.
//
// The placement generation also raises the checkpoint generations the
// owner's kernels save (the high 32 bits): every save under placement g
// is newer than any save under g-1, so a late save of a node that lost
// its placement is refused by the store once the new node has saved.

// fenceShift places the placement generation above the checkpoint
// generations saved under it (2^32 saves per placement).
const fenceShift = 32

// maxFences bounds the owners whose placement generation a node keeps.
// Past it, owners with no kernel here are forgotten: a stale request for
// one of them would start a kernel from the store, which the router's
// record (read on every request) does not send here.
const maxFences = 1 << 16

// ErrFenced: a request carries an owner placement generation older than
// one this node has seen (the owner was placed on another node since).
var ErrFenced = errors.New("the owner was placed under a newer generation")

// Fence records that a request of owner comes under placement
// generation gen (>= 1; 0 means no fleet and is ignored). It fails with
// ErrFenced for a generation older than one seen; a newer one tears the
// owner's kernels down without saving (reasonFenced).
func (p *Pool) Fence(owner string, gen uint64) error {
	if gen == 0 {
		return nil
	}
	if gen >= 1<<(64-fenceShift) {
		return fmt.Errorf("%w: owner generation %d is 2^%d or more", ErrBadRequest, gen, 64-fenceShift)
	}
	if owner == "" {
		owner = defaultName
	}
	p.mu.Lock()
	seen, known := p.fences[owner]
	switch {
	case gen < seen:
		p.mu.Unlock()
		return fmt.Errorf("owner %q generation %d (this node has seen %d): %w", owner, gen, seen, ErrFenced)
	case gen == seen:
		p.mu.Unlock()
		return nil
	}
	if !known && len(p.fences) >= maxFences {
		p.forgetFencesLocked()
	}
	if p.fences == nil {
		p.fences = make(map[string]uint64)
	}
	p.fences[owner] = gen
	p.mu.Unlock()
	if gone := p.killWhere(reasonFenced, func(s *slot) bool { return s.key.owner == owner }); len(gone) > 0 {
		p.log.Warn("owner placed here under a newer generation: its kernels from before are dropped unsaved",
			"owner", owner, "generation", gen, "previous", seen, "kernels", len(gone))
	}
	return nil
}

// forgetFencesLocked forgets the generations of owners with no slot.
func (p *Pool) forgetFencesLocked() {
	held := make(map[string]bool, len(p.slots))
	for k := range p.slots {
		held[k.owner] = true
	}
	for o := range p.fences {
		if !held[o] {
			delete(p.fences, o)
		}
	}
}

// saveGenLocked is the checkpoint generation lv's next save writes: one
// more than it restored or saved, and at least the first generation of
// its owner's current placement.
func (p *Pool) saveGenLocked(lv *live) uint64 {
	return max(lv.gen+1, p.fences[lv.key.owner]<<fenceShift)
}
