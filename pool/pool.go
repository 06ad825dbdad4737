package pool

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Pool is the registry of live session kernels. Safe for concurrent use.
type Pool struct {
	cfg Config
	log hclog.Logger

	mu    sync.Mutex
	slots map[key]*slot
	byID  map[string]*slot
	// users counts callers between enter and leave, for Close's drain.
	users int
	// closing refuses new cells; set once by Close.
	closing bool
	// drained is closed when users reaches 0 while closing (nil otherwise).
	drained chan struct{}
	stats   PoolStats
	// obs is cfg.Observer (never nil).
	obs Observer
	// quotas and buckets enforce the per-owner quotas (under mu).
	quotas  Quotas
	buckets map[string]*bucket
	// sp are the warm spares (spares.go; under mu).
	sp spareState
	// policies are the cell policies by mode: cfg.Policies until
	// SetPolicies replaces them (read without mu: persist asks under it).
	policies atomic.Pointer[map[string]CellPolicy]

	// spawns counts kernel starts in flight; Close waits for them so that
	// no kernel outlives it.
	spawns sync.WaitGroup
	// killCtx is canceled by Close's kill phase: it aborts spawns.
	killCtx context.Context
	killAll context.CancelFunc

	// ckpt stores checkpoints; saving maps a key to its save in flight
	// (under mu), which the key's next kernel waits for before restoring.
	ckpt   *ckptStore
	saving map[key]chan struct{}
	// savingN counts evicted or reaped kernels whose save runs in the
	// background (under mu); bgSaves tracks those saves for Close; idle
	// tracks the idle saver (idlesave.go).
	savingN int
	bgSaves sync.WaitGroup
	idle    sync.WaitGroup

	// sessions are the explicit sessions by id (sessions.go; under mu).
	sessions map[string]*session
	// keyMasks are the request env values persist keys' kernels masked
	// (envmask.go; under mu).
	keyMasks map[key]*maskEntry

	stopOnce   sync.Once
	stop       chan struct{} // closed by Close: ends the reaper
	reaperDone chan struct{}
}

// New validates cfg, fills its defaults and starts the idle reaper.
func New(cfg Config) (*Pool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Pool{
		cfg:        cfg,
		log:        cfg.Logger.Named("pool"),
		slots:      make(map[key]*slot),
		byID:       make(map[string]*slot),
		obs:        cfg.Observer,
		quotas:     cfg.Quotas,
		buckets:    make(map[string]*bucket),
		sp:         newSpareState(cfg.Warm),
		saving:     make(map[key]chan struct{}),
		stop:       make(chan struct{}),
		reaperDone: make(chan struct{}),
	}
	policies := maps.Clone(cfg.Policies)
	p.policies.Store(&policies)
	if err := p.prepareSpillRoot(); err != nil {
		return nil, err
	}
	if p.ckpt, err = openCkptStore(cfg.StateDir, cfg.Checkpoints, p.log); err != nil {
		return nil, err
	}
	p.sweepCheckpoints(time.Now())
	p.killCtx, p.killAll = context.WithCancel(context.Background())
	go p.reaper()
	go p.refiller()
	p.idle.Add(1)
	go p.idleSaver()
	return p, nil
}

// reaper kills idle kernels every ReapInterval until Close.
func (p *Pool) reaper() {
	defer close(p.reaperDone)
	t := time.NewTicker(p.cfg.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			p.mu.Lock()
			if p.closing { // Close stops the kernels itself
				p.mu.Unlock()
				return
			}
			gone := p.reapLocked(now)
			p.pruneBucketsLocked(now)
			expired := p.expireSessionsLocked(now)
			p.expireMasksLocked(now)
			p.mu.Unlock()
			p.teardownAll(gone)
			for _, k := range expired {
				p.ckpt.remove(k, deleteAll)
			}
			p.sweepCheckpoints(now)
		}
	}
}

// List describes every live kernel, sorted by owner then id. Resource
// figures come from each kernel's sandbox and are zero without a cgroup.
func (p *Pool) List() []KernelInfo {
	now := time.Now()
	p.mu.Lock()
	entries := p.spareInfosLocked(now)
	for _, s := range p.slots {
		lv := s.live
		if lv == nil {
			continue
		}
		idle := 0.0
		if s.users == 0 {
			idle = now.Sub(s.lastUsed).Seconds()
		}
		entries = append(entries, listEntry{lv, KernelInfo{
			ID: lv.id, Owner: lv.owner, Mode: lv.mode, Interpreter: s.key.interpreter, Cwd: s.key.cwd,
			Tools: slices.Clone(s.tools), Session: s.key.session, Pid: lv.pid, UID: lv.uid, Busy: s.users > 0,
			ExecutionCount: lv.execCount, IdleSeconds: idle, StartedAt: lv.startedAt, Isolation: lv.isolation,
		}})
	}
	p.mu.Unlock()
	out := make([]KernelInfo, len(entries))
	for i, e := range entries {
		// Outside the lock: the sandbox reads cgroup files.
		if st, err := e.lv.k.Stats(); err == nil {
			e.info.MemoryCurrent, e.info.MemoryPeak, e.info.Pids = st.MemoryCurrent, st.MemoryPeak, st.Pids
			e.info.CPUSeconds = st.CPUTime.Seconds()
		}
		e.info.DroppedOutputBytes = e.lv.k.DroppedOutput()
		out[i] = e.info
	}
	slices.SortFunc(out, func(a, b KernelInfo) int {
		return cmp.Or(cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// listEntry is one kernel of List, before its cgroup figures are read.
type listEntry struct {
	lv   *live
	info KernelInfo
}

// Kill kills one kernel by id (a spare too), also while it runs a cell
// (that cell ends as interrupted), and returns once it is gone.
// ErrNotFound if no live kernel has that id.
func (p *Pool) Kill(id string) error {
	p.mu.Lock()
	if lv := p.killSpareLocked(id); lv != nil {
		p.mu.Unlock()
		p.teardown(lv, reasonKilled)
		return nil
	}
	s := p.byID[id]
	if s == nil || s.live == nil {
		p.mu.Unlock()
		return fmt.Errorf("kill %q: %w", id, ErrNotFound)
	}
	lv := s.live
	p.removeLocked(s, reasonKilled)
	p.stats.Killed++
	p.mu.Unlock()
	p.teardown(lv, reasonKilled)
	return nil
}

// ShutdownOwner kills every kernel of owner, busy ones included (their
// cells end as interrupted), and returns how many it killed once all of
// them are gone. Callers queued on those kernels start fresh ones.
func (p *Pool) ShutdownOwner(owner string) int {
	if owner == "" {
		owner = defaultName
	}
	p.mu.Lock()
	p.dropOwnerSessionsLocked(owner)
	p.mu.Unlock()
	p.forgetMasksWhere(func(k key) bool { return k.owner == owner })
	gone := p.killWhere(reasonOwner, func(s *slot) bool { return s.key.owner == owner })
	p.dropOwnerCheckpoints(owner)
	if len(gone) > 0 {
		p.log.Info("owner shut down", "owner", owner, "kernels", len(gone))
	}
	return len(gone)
}

// Close drains the pool: new cells are refused with ErrClosed at once,
// running and queued cells may finish until ctx is done, then every kernel
// is killed (cells still running end as interrupted) and the reaper
// stops. It returns nil after a complete drain, or an error wrapping
// ctx's error when cells had to be cut short. Idempotent: a later call
// kills whatever remains and returns nil.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closing = true
	for _, s := range p.slots {
		s.interruptIdleSaveLocked() // Close's own save follows, bounded
	}
	var wait chan struct{}
	if p.users > 0 {
		if p.drained == nil {
			p.drained = make(chan struct{})
		}
		wait = p.drained
	}
	p.mu.Unlock()
	p.stopOnce.Do(func() { close(p.stop) })

	var cut error
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			cut = fmt.Errorf("close: drain cut short, running cells were killed: %w", ctx.Err())
		}
	}
	p.killAll()
	gone := p.killWhere(reasonClosed, func(*slot) bool { return true })
	p.mu.Lock()
	spares := p.closeSparesLocked()
	p.mu.Unlock()
	p.teardownAll(spares)
	// A spawn that was starting finds its slot removed and tears its
	// kernel down itself before it is Done; a spare that was starting is
	// torn down by the refiller, which then returns.
	p.spawns.Wait()
	<-p.sp.done
	<-p.reaperDone
	p.idle.Wait()
	p.bgSaves.Wait() // evicted and reaped kernels still saving
	p.dropSessionCheckpoints()
	if len(gone) > 0 {
		p.log.Info("pool closed", "kernels_killed", len(gone))
	}
	return cut
}

// Stats returns the pool's counters and its current size.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.KernelsSaving = p.savingN
	for _, list := range p.sp.ready {
		st.Spares += len(list)
	}
	for _, s := range p.slots {
		if s.live != nil || s.users > 0 {
			st.KernelsLive++
		}
		if s.users > 0 {
			st.KernelsBusy++
		}
	}
	return st
}

// killWhere takes every slot match selects out of the registry,
// reporting reason to a cell still running there, tears their kernels down
// and returns them.
func (p *Pool) killWhere(reason teardownReason, match func(*slot) bool) []doomed {
	p.mu.Lock()
	var gone []doomed
	for _, s := range p.slots {
		if !match(s) {
			continue
		}
		if s.live != nil {
			gone = append(gone, doomed{s.live, reason})
			p.stats.Killed++
		}
		p.removeLocked(s, reason)
	}
	p.mu.Unlock()
	p.teardownAll(gone)
	return gone
}
