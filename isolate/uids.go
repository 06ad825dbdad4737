package isolate

import (
	"fmt"
	"hash/fnv"
	"sync"
)

// uidPool hands out kernel uids from a range: one per live kernel, or one
// stable uid per owner shared by that owner's kernels.
type uidPool struct {
	mu       sync.Mutex
	first    int
	last     int
	perOwner bool
	leases   map[int]*uidLease
	tainted  map[int]bool // uids with foreign processes at start: never used
	next     int
}

type uidLease struct {
	owner string
	refs  int
}

func newUIDPool(first, last int, perOwner bool, tainted map[int]bool) *uidPool {
	if tainted == nil {
		tainted = map[int]bool{}
	}
	return &uidPool{first: first, last: last, perOwner: perOwner, leases: map[int]*uidLease{}, tainted: tainted, next: first}
}

func (p *uidPool) size() int { return p.last - p.first + 1 }

// acquire reserves a uid for one kernel of owner.
func (p *uidPool) acquire(owner string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := p.next
	if p.perOwner {
		h := fnv.New32a()
		_, _ = h.Write([]byte(owner))
		start = p.first + int(h.Sum32()%uint32(p.size()))
		// The owner's uid is the first in probe order that is free or its own.
		for i := 0; i < p.size(); i++ {
			uid := p.first + (start-p.first+i)%p.size()
			if p.tainted[uid] {
				continue
			}
			if l, ok := p.leases[uid]; ok && l.owner == owner {
				l.refs++
				return uid, nil
			}
		}
	}
	for i := 0; i < p.size(); i++ {
		uid := p.first + (start-p.first+i)%p.size()
		if p.tainted[uid] || p.leases[uid] != nil {
			continue
		}
		p.leases[uid] = &uidLease{owner: owner, refs: 1}
		if !p.perOwner {
			p.next = p.first + (uid-p.first+1)%p.size() // round robin: a freed uid rests
		}
		return uid, nil
	}
	return -1, fmt.Errorf("acquire uid for owner %q: %w (range %d-%d, %d tainted)", owner, ErrNoUID, p.first, p.last, len(p.tainted))
}

// release frees one reference to uid.
func (p *uidPool) release(uid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.leases[uid]
	if !ok {
		return
	}
	if l.refs--; l.refs <= 0 {
		delete(p.leases, uid)
	}
}

// taint retires uid for good (its processes could not be proven gone).
func (p *uidPool) taint(uid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tainted[uid] = true
	delete(p.leases, uid)
}

func (p *uidPool) inUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.leases)
}
