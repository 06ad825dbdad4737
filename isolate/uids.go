package isolate

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sync"
)

// uidPool hands out kernel uids from a range: one per live kernel, or one
// stable uid per owner shared by that owner's kernels. With a lock dir,
// every lease also holds an exclusive lock on <lockDir>/<uid>.lock, so two
// daemons on one host (same range) never lease the same uid: a uid is
// then one kernel's alone, which is what makes killing by uid safe.
type uidPool struct {
	mu       sync.Mutex
	first    int
	last     int
	perOwner bool
	lockDir  string // "" = no cross-daemon locking (unit tests)
	leases   map[int]*uidLease
	tainted  map[int]bool // uids with foreign processes at start: never used
	retired  []io.Closer  // locks of tainted uids, held until the daemon exits
	next     int
}

type uidLease struct {
	owner string
	refs  int
	lock  io.Closer // nil without a lock dir
}

func newUIDPool(first, last int, perOwner bool, lockDir string, tainted map[int]bool) *uidPool {
	if tainted == nil {
		tainted = map[int]bool{}
	}
	return &uidPool{first: first, last: last, perOwner: perOwner, lockDir: lockDir,
		leases: map[int]*uidLease{}, tainted: tainted, next: first}
}

// lease takes uid for owner if no other daemon holds it; false means it is
// held elsewhere.
func (p *uidPool) lease(uid int, owner string) (bool, error) {
	var lock io.Closer
	if p.lockDir != "" {
		var err error
		lock, err = lockUID(p.lockDir, uid)
		if errors.Is(err, errUIDHeld) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	p.leases[uid] = &uidLease{owner: owner, refs: 1, lock: lock}
	return true, nil
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
		ok, err := p.lease(uid, owner)
		if err != nil {
			return -1, fmt.Errorf("acquire uid for owner %q: %w", owner, err)
		}
		if !ok {
			continue // another daemon's kernel has it
		}
		if !p.perOwner {
			p.next = p.first + (uid-p.first+1)%p.size() // round robin: a freed uid rests
		}
		return uid, nil
	}
	return -1, fmt.Errorf("acquire uid for owner %q: %w (range %d-%d, %d tainted; uids leased by other daemons are skipped)", owner, ErrNoUID, p.first, p.last, len(p.tainted))
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
		if l.lock != nil {
			_ = l.lock.Close()
		}
	}
}

// taint retires uid for good (its processes could not be proven gone).
func (p *uidPool) taint(uid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tainted[uid] = true
	if l := p.leases[uid]; l != nil && l.lock != nil {
		// Its processes may linger: no other daemon may take it either.
		p.retired = append(p.retired, l.lock)
	}
	delete(p.leases, uid)
}

func (p *uidPool) inUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.leases)
}
