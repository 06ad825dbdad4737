package isolate

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"sync"
	"time"
)

// uidPool hands out kernel uids from a range: one per live kernel, or one
// stable uid per owner shared by that owner's kernels. With a lock dir,
// every lease also holds an exclusive lock on <lockDir>/<uid>.lock, so two
// daemons on one host (same range) never lease the same uid: a uid is
// then one kernel's alone, which is what makes killing by uid safe.
//
// A per-kernel lease takes the least recently used free uid. The lock
// file's mtime records when its uid was last leased or released, so the
// order survives a daemon restart and is shared by every daemon on the
// host: a restarted daemon does not hand its first tenant the uid the last
// tenant before the restart had.
type uidPool struct {
	mu       sync.Mutex
	first    int
	last     int
	perOwner bool
	lockDir  string // "" = no cross-daemon locking or persistence (unit tests)
	leases   map[int]*uidLease
	// tainted are uids that may still run processes (foreign ones at start,
	// or a kernel's that outlived it): not handed out until busy says they
	// are gone, which acquire checks when no clean uid is left.
	tainted map[int]bool
	retired map[int]io.Closer // locks of tainted uids: no other daemon takes them either
	order   []int             // every uid of the range, least recently used first
	// scrub removes what a previous tenant of uid left on the host before
	// the uid is handed out. It cannot refuse the uid: a tenant must not be
	// able to make a uid unusable by leaving more than a scrub removes (it
	// logs and counts what it could not do). nil: nothing to do.
	scrub func(uid int)
	// busy says whether any process still runs as uid (nil: tainted uids
	// never come back, as in tests without /proc).
	busy func(uid int) bool
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
	p := &uidPool{first: first, last: last, perOwner: perOwner, lockDir: lockDir,
		leases: map[int]*uidLease{}, tainted: tainted, retired: map[int]io.Closer{}}
	p.order = make([]int, 0, p.size())
	for uid := first; uid <= last; uid++ {
		p.order = append(p.order, uid)
	}
	if lockDir != "" {
		used := make(map[int]time.Time, p.size())
		for _, uid := range p.order {
			used[uid] = uidLastUsed(lockDir, uid) // zero: never leased here
		}
		slices.SortStableFunc(p.order, func(a, b int) int { return used[a].Compare(used[b]) })
	}
	return p
}

// lease takes uid for owner if no other daemon holds it; false means it is
// held elsewhere. The previous tenant's leftovers are scrubbed first.
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
		touchUID(p.lockDir, uid)
	}
	if p.scrub != nil {
		p.scrub(uid)
	}
	p.leases[uid] = &uidLease{owner: owner, refs: 1, lock: lock}
	p.used(uid)
	return true, nil
}

// used moves uid to the most recently used end of the order.
func (p *uidPool) used(uid int) {
	if i := slices.Index(p.order, uid); i >= 0 {
		p.order = append(slices.Delete(p.order, i, i+1), uid)
	}
}

func (p *uidPool) size() int { return p.last - p.first + 1 }

// acquire reserves a uid for one kernel of owner.
func (p *uidPool) acquire(owner string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	candidates := slices.Clone(p.order)
	if p.perOwner {
		h := fnv.New32a()
		_, _ = h.Write([]byte(owner))
		start := int(h.Sum32() % uint32(p.size()))
		candidates = candidates[:0]
		for i := 0; i < p.size(); i++ {
			candidates = append(candidates, p.first+(start+i)%p.size())
		}
		// The owner's uid is the first in probe order that is free or its own.
		for _, uid := range candidates {
			if l, ok := p.leases[uid]; ok && l.owner == owner && !p.tainted[uid] {
				l.refs++
				return uid, nil
			}
		}
	}
	for round := 0; round < 2; round++ {
		if round == 1 && p.revive() == 0 {
			break
		}
		for _, uid := range candidates {
			if p.tainted[uid] || p.leases[uid] != nil {
				continue
			}
			ok, err := p.lease(uid, owner)
			if err != nil {
				return -1, fmt.Errorf("acquire uid for owner %q: %w", owner, err)
			}
			if ok {
				return uid, nil
			}
			// Another daemon's kernel has it.
		}
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
		p.used(uid)
		if l.lock != nil {
			touchUID(p.lockDir, uid) // before the unlock: the order is the host's
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
		p.retired[uid] = l.lock
	}
	delete(p.leases, uid)
}

// revive returns the tainted uids no process runs as any more to the free
// uids (the scrub of their next lease removes what they left) and says
// how many came back. Called with p.mu held.
func (p *uidPool) revive() int {
	if p.busy == nil {
		return 0
	}
	n := 0
	for uid := range p.tainted {
		if p.busy(uid) {
			continue
		}
		delete(p.tainted, uid)
		if l := p.retired[uid]; l != nil {
			_ = l.Close()
			delete(p.retired, uid)
		}
		n++
	}
	return n
}

// taintedCount is how many uids are retired now.
func (p *uidPool) taintedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.tainted)
}

func (p *uidPool) inUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.leases)
}
