package fleet

import "sync"

// maxRouterRecords bounds the owner records a router keeps; past it
// the cache is emptied (a miss only costs a read).
const maxRouterRecords = 1 << 16

// ownerCache is a router's copy of the owner records it read or wrote.
// It may be stale: another router may have moved an owner since. That
// is safe because the node checks every generation against its own
// watched view of the records (PlacementCache) and answers 409 fenced,
// before running anything, for an owner no longer placed there; the
// router then drops its copy, reads the record and resends.
type ownerCache struct {
	mu   sync.Mutex
	recs map[string]Placement
}

func (c *ownerCache) get(owner string) (Placement, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.recs[owner]
	return p, ok
}

func (c *ownerCache) put(owner string, p Placement) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recs == nil || len(c.recs) >= maxRouterRecords {
		c.recs = make(map[string]Placement)
	}
	c.recs[owner] = p
}

func (c *ownerCache) drop(owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.recs, owner)
}
