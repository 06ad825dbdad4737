package pool

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/kernpool/kernpool/kernel"
)

// Warm spares (docs/design.md, "Warm spares"): per mode, kernels started
// ahead of demand with everything that does not depend on an owner
// (sandbox, interpreter, runner, preloaded modules). A request for a new
// key claims one under the registry lock and binds it (kernel.Bind: cwd,
// environment, tool socket) before its first cell. A spare is claimed at
// most once and never returns: whatever happens after the claim, it ends
// with its key. One refill goroutine starts replacements, one at a time,
// outside every lock; spares count toward MaxKernels and are evicted first.

// DefaultSpares is the daemon's number of spares per profile.
const DefaultSpares = 2

// Refill back-off after a spare failed to start (a broken preload must not
// spin): doubling from minSpareBackoff up to maxSpareBackoff.
const (
	minSpareBackoff = time.Second
	maxSpareBackoff = time.Minute
)

// spareBackoff is how long a mode waits after its n-th failed spare in a
// row: minSpareBackoff doubled n-1 times, at most maxSpareBackoff (the
// shift is capped so a long failing streak cannot overflow it).
func spareBackoff(n int) time.Duration {
	return min(minSpareBackoff<<min(n-1, 8), maxSpareBackoff)
}

// Warm is one mode's warm start.
type Warm struct {
	// Spares is how many kernels of the mode are kept started ahead of
	// demand (0: none). They run the pool's DefaultInterpreter with the
	// mode's profile, count toward MaxKernels and are evicted before any
	// owner's kernel. A request with its own Limits or Interpreter starts
	// cold. The SandboxFactory must not make a sandbox depend on the owner
	// (a spare's owner is unknown when it starts: the daemon has no spares
	// with per-owner uids).
	Spares int
	// Preload are modules every kernel of the mode imports before its first
	// cell, spares and cold starts alike (dotted names, e.g. "email.mime").
	Preload []string
	// Profile identifies the mode's sandbox profile as the SandboxFactory
	// applies it now (the daemon passes a digest of its settings): SetWarm
	// replaces the spares of a mode whose Profile or Preload changed.
	Profile string
}

// spareState is the pool's spares: ready ones by mode, the one starting,
// and the refill's bookkeeping. Guarded by Pool.mu.
type spareState struct {
	warm  map[string]Warm
	ready map[string][]*live
	// starting is the spare being started (nil when none).
	starting *spareStart
	// gen[mode] changes whenever the mode's spares became stale.
	gen map[string]uint64
	// failures and retryAt back off a mode whose spares fail to start.
	failures map[string]int
	retryAt  map[string]time.Time
	// changed is closed and replaced whenever the ready set changes.
	changed chan struct{}
	kick    chan struct{} // wakes the refiller (capacity 1)
	done    chan struct{} // closed when the refiller returned
}

type spareStart struct {
	mode   string
	gen    uint64
	cancel context.CancelFunc
	doomed bool
}

func newSpareState(warm map[string]Warm) spareState {
	return spareState{warm: cloneWarm(warm), ready: map[string][]*live{}, gen: map[string]uint64{},
		failures: map[string]int{}, retryAt: map[string]time.Time{},
		changed: make(chan struct{}), kick: make(chan struct{}, 1), done: make(chan struct{})}
}

func cloneWarm(w map[string]Warm) map[string]Warm {
	out := make(map[string]Warm, len(w))
	for mode, v := range w {
		v.Preload = slices.Clone(v.Preload)
		out[mode] = v
	}
	return out
}

// checkWarm validates warm-start settings.
func checkWarm(w map[string]Warm) error {
	for mode, v := range w {
		if v.Spares < 0 {
			return fmt.Errorf("mode %q: spares must not be negative: %w", mode, ErrBadRequest)
		}
		for _, m := range v.Preload {
			if !kernel.ValidModuleName(m) {
				return fmt.Errorf("mode %q: preload %q is not a module name: %w", mode, m, ErrBadRequest)
			}
		}
	}
	return nil
}

// kickRefill wakes the refiller without blocking.
func (p *Pool) kickRefill() {
	select {
	case p.sp.kick <- struct{}{}:
	default:
	}
}

// sparesChangedLocked wakes WaitSpares callers.
func (p *Pool) sparesChangedLocked() {
	close(p.sp.changed)
	p.sp.changed = make(chan struct{})
}

// spareCountLocked is the number of spares counted against MaxKernels.
func (p *Pool) spareCountLocked() int {
	n := 0
	for _, list := range p.sp.ready {
		n += len(list)
	}
	if p.sp.starting != nil && !p.sp.starting.doomed {
		n++
	}
	return n
}

// refiller keeps every mode at its number of spares until Close.
func (p *Pool) refiller() {
	defer close(p.sp.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		mode, gen, wait, ok := p.nextSpare()
		if ok {
			p.startSpare(mode, gen)
			continue
		}
		if wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-p.stop:
			return
		case <-p.sp.kick:
		case <-timer.C:
		}
	}
}

// nextSpare picks a mode short of spares while there is room under
// MaxKernels, and registers its start; else it says how long until a
// backed-off mode may try again (0: nothing to wait for).
func (p *Pool) nextSpare() (mode string, gen uint64, wait time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing || p.sp.starting != nil {
		return "", 0, 0, false
	}
	if len(p.slots)+p.spareCountLocked() >= p.cfg.MaxKernels {
		return "", 0, 0, false
	}
	now := time.Now()
	for _, m := range slices.Sorted(maps.Keys(p.sp.warm)) {
		if len(p.sp.ready[m]) >= p.sp.warm[m].Spares {
			continue
		}
		if at := p.sp.retryAt[m]; now.Before(at) {
			if w := at.Sub(now); wait == 0 || w < wait {
				wait = w
			}
			continue
		}
		p.sp.starting = &spareStart{mode: m, gen: p.sp.gen[m]}
		return m, p.sp.gen[m], 0, true
	}
	return "", 0, wait, false
}

// startSpare starts one spare of mode and files it as ready, unless it
// became stale or unwanted meanwhile.
func (p *Pool) startSpare(mode string, gen uint64) {
	ctx, cancel := context.WithCancel(p.killCtx)
	defer cancel()
	p.mu.Lock()
	p.sp.starting.cancel = cancel
	p.mu.Unlock()
	fi, statErr := os.Stat(p.cfg.DefaultInterpreter)
	rq := normalized{key: key{mode: mode, interpreter: p.cfg.DefaultInterpreter}}
	lv, err := p.spawn(ctx, rq)
	if err == nil {
		// The bind parses its request with json: import it now, which
		// also proves the runner is up and idle (Start returns as soon as
		// the process runs, well before the interpreter has started).
		// A persist mode's spare restores its owner's checkpoint before
		// the first cell: its checkpoint module is imported now too, off
		// the request path.
		mods := []string{"json"}
		if p.policy(mode).Persist {
			mods = append(mods, kernel.CheckpointModule)
		}
		if err = cmp.Or(statErr, lv.k.Preload(ctx, mods)); err != nil {
			p.teardown(lv, reasonSpare)
		}
	}
	p.mu.Lock()
	st := p.sp.starting
	p.sp.starting = nil
	if err != nil {
		n := p.sp.failures[mode] + 1
		p.sp.failures[mode] = n
		p.sp.retryAt[mode] = time.Now().Add(spareBackoff(n))
		p.mu.Unlock()
		if ctx.Err() == nil {
			p.log.Error("spare kernel failed to start", "mode", mode, "error", err)
			p.obs.SpawnFailed(mode)
		}
		return
	}
	lv.spare, lv.interp = true, fi
	keep := !p.closing && !st.doomed && p.sp.gen[mode] == gen && len(p.sp.ready[mode]) < p.sp.warm[mode].Spares
	if keep {
		delete(p.sp.failures, mode)
		delete(p.sp.retryAt, mode)
		lv.claimed, lv.counted = make(chan struct{}), true
		p.sp.ready[mode] = append(p.sp.ready[mode], lv)
		p.stats.SparesStarted++
		p.sparesChangedLocked()
	}
	p.mu.Unlock()
	if !keep {
		p.teardown(lv, reasonSpare)
		return
	}
	p.log.Debug("spare kernel ready", "id", lv.id, "mode", mode, "pid", lv.pid, "uid", lv.uid)
	p.obs.SparesChanged(mode, 1)
	go p.watchSpare(lv)
}

// watchSpare drops a ready spare that dies (killed from outside, OOM in
// a preload thread) so the refiller replaces it.
func (p *Pool) watchSpare(lv *live) {
	select {
	case <-lv.k.Done():
	case <-lv.claimed:
		return
	}
	p.mu.Lock()
	dropped := p.dropSpareLocked(lv)
	p.mu.Unlock()
	if dropped {
		p.log.Warn("spare kernel died", "id", lv.id, "mode", lv.mode, "error", lv.k.Err())
		p.teardown(lv, reasonDied)
		p.kickRefill()
	}
}

// dropSpareLocked takes lv out of the ready spares (false: it was not there).
func (p *Pool) dropSpareLocked(lv *live) bool {
	list := p.sp.ready[lv.mode]
	i := slices.Index(list, lv)
	if i < 0 {
		return false
	}
	p.sp.ready[lv.mode] = slices.Delete(list, i, i+1)
	close(lv.claimed)
	p.sparesChangedLocked()
	return true
}

// claimSpareLocked takes a ready spare for rq's new key, or nil when none
// fits: the mode's spares run the default interpreter, unchanged since they
// started, with the profile's own limits. Spares found dead or stale are
// returned in gone (to tear down). The caller reports the claimed one to
// the observer (it left the spare gauge).
func (p *Pool) claimSpareLocked(rq *normalized) (lv *live, gone []doomed) {
	if rq == nil || rq.key.interpreter != p.cfg.DefaultInterpreter || rq.limits != (Limits{}) {
		return nil, nil
	}
	for len(p.sp.ready[rq.key.mode]) > 0 {
		cand := p.sp.ready[rq.key.mode][0]
		p.dropSpareLocked(cand)
		if cand.dead() || !sameFile(cand.interp, rq.interpFI) {
			gone = append(gone, doomed{cand, reasonSpare})
			continue
		}
		cand.owner, cand.counted = rq.key.owner, false
		p.stats.SparesClaimed++
		return cand, gone
	}
	return nil, gone
}

// sameFile reports whether two stats of an interpreter name one unchanged
// file (a package upgrade replaces or rewrites it).
func sameFile(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// evictSparesLocked takes up to n spares out (ready ones oldest first, then
// the one starting) and returns those to tear down.
func (p *Pool) evictSparesLocked(n int) (gone []doomed) {
	taken := 0
	for taken < n {
		var oldest *live
		for _, list := range p.sp.ready {
			if len(list) > 0 && (oldest == nil || list[0].startedAt.Before(oldest.startedAt)) {
				oldest = list[0]
			}
		}
		if oldest == nil {
			break
		}
		p.dropSpareLocked(oldest)
		gone = append(gone, doomed{oldest, reasonEvicted})
		taken++
	}
	if taken < n && p.sp.starting != nil && !p.sp.starting.doomed {
		p.sp.starting.doomed = true
		if p.sp.starting.cancel != nil {
			p.sp.starting.cancel()
		}
		taken++
	}
	p.stats.SparesEvicted += uint64(taken)
	return gone
}

// bindSpare binds the spare lv, claimed for s's new key, to rq's owner
// (kernel.Bind) and attaches what the owner's kernel needs: tool
// listener, output filter. A spare that cannot be bound is torn down
// (never offered again) and lv nil says to start the kernel cold; a
// refused passthrough is the request's error.
func (p *Pool) bindSpare(ctx context.Context, s *slot, lv *live, rq normalized, start time.Time) (*live, *Result, error) {
	env, scrubbed, err := p.buildEnv(rq)
	if err != nil {
		p.discard(s, lv, reasonSpare)
		return nil, nil, fmt.Errorf("execute: %w", err)
	}
	var tools ToolServer
	b := kernel.Binding{Cwd: rq.key.cwd, Env: env}
	if len(rq.tools) > 0 {
		b.Files, b.Setup = p.toolStaging(rq, lv.uid, &tools)
	}
	if err := lv.k.Bind(ctx, b); err != nil {
		p.abandonSpawn(lv.id, tools)
		p.discard(s, lv, reasonSpare)
		if ctx.Err() != nil {
			return nil, interruptedResult(rq, start, "canceled by the caller", nil, kernelUse{}), nil
		}
		p.log.Warn("spare kernel could not be bound; starting one cold", "id", lv.id, "owner", rq.key.owner, "error", err)
		return nil, nil, nil
	}
	filter := p.filterFor(scrubbed, tools)
	p.mu.Lock()
	doom, down := s.doom, lv.down
	if !down {
		lv.tools, lv.filter, lv.passthrough, lv.spare, lv.observed = tools, filter, rq.passthrough, false, true
		lv.secrets = scrubbed
		p.stats.KernelsStarted++
	}
	if doom == "" {
		doom = reasonKilled // only reported when the slot was removed or lv torn down
	}
	p.mu.Unlock()
	if down {
		// Killed while binding (owner shutdown, Close): the listener is ours.
		p.abandonSpawn(lv.id, tools)
		return nil, interruptedResult(rq, start, string(doom), lv, kernelUse{}), nil
	}
	p.log.Info("kernel started", "id", lv.id, "owner", lv.owner, "mode", lv.mode, "pid", lv.pid, "uid", lv.uid, "spare", true)
	p.obs.KernelStarted(lv.mode)
	if s.removed {
		p.teardown(lv, doom)
		return nil, interruptedResult(rq, start, string(doom), lv, kernelUse{}), nil
	}
	return lv, nil, nil
}

// SetWarm replaces the warm-start settings (the daemon's SIGHUP reload).
// The spares of a mode whose Profile or Preload changed are replaced,
// those over a lowered count are stopped, and the refill starts what is
// missing. Kernels already claimed keep what they started with.
func (p *Pool) SetWarm(warm map[string]Warm) error {
	if err := checkWarm(warm); err != nil {
		return err
	}
	p.mu.Lock()
	var gone []doomed
	for mode, list := range p.sp.ready {
		old, next := p.sp.warm[mode], warm[mode]
		keep := len(list)
		if old.Profile != next.Profile || !slices.Equal(old.Preload, next.Preload) {
			keep = 0
			p.sp.gen[mode]++
		}
		for _, lv := range slices.Clone(list[min(keep, next.Spares):]) {
			p.dropSpareLocked(lv)
			gone = append(gone, doomed{lv, reasonSpare})
		}
	}
	if st := p.sp.starting; st != nil {
		old, next := p.sp.warm[st.mode], warm[st.mode]
		if old.Profile != next.Profile || !slices.Equal(old.Preload, next.Preload) {
			p.sp.gen[st.mode]++
		}
	}
	p.sp.warm = cloneWarm(warm)
	clear(p.sp.failures)
	clear(p.sp.retryAt)
	p.mu.Unlock()
	p.teardownAll(gone)
	p.kickRefill()
	if len(gone) > 0 {
		p.log.Info("spare kernels replaced", "stopped", len(gone))
	}
	return nil
}

// WaitSpares blocks until mode has at least n ready spares, or ctx ends
// (its error is returned). For readiness checks, tests and benchmarks.
func (p *Pool) WaitSpares(ctx context.Context, mode string, n int) error {
	if mode == "" {
		mode = defaultName
	}
	for {
		p.mu.Lock()
		have, ch := len(p.sp.ready[mode]), p.sp.changed
		p.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for %d spares of mode %q (have %d): %w", n, mode, have, ctx.Err())
		}
	}
}

// spareInfosLocked describes the ready spares for List.
func (p *Pool) spareInfosLocked(now time.Time) []listEntry {
	var out []listEntry
	for _, list := range p.sp.ready {
		for _, lv := range list {
			out = append(out, listEntry{lv, KernelInfo{
				ID: lv.id, Mode: lv.mode, Interpreter: p.cfg.DefaultInterpreter, Pid: lv.pid, UID: lv.uid,
				IdleSeconds: now.Sub(lv.startedAt).Seconds(), StartedAt: lv.startedAt,
				Isolation: lv.isolation, Spare: true,
			}})
		}
	}
	return out
}

// killSpareLocked takes the ready spare id out (Kill by id); nil if none.
func (p *Pool) killSpareLocked(id string) *live {
	for _, list := range p.sp.ready {
		for _, lv := range list {
			if lv.id == id {
				p.dropSpareLocked(lv)
				return lv
			}
		}
	}
	return nil
}

// closeSparesLocked takes every ready spare out for Close.
func (p *Pool) closeSparesLocked() (gone []doomed) {
	for _, list := range p.sp.ready {
		for _, lv := range slices.Clone(list) {
			p.dropSpareLocked(lv)
			gone = append(gone, doomed{lv, reasonClosed})
		}
	}
	return gone
}
