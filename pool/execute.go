package pool

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Execute runs one cell in the kernel of req's key, starting that kernel
// when there is none (or when req.Reset asks for a fresh one). Calls on
// one key are serialized; a call waiting for its turn whose ctx ends
// returns an "interrupted" Result without touching the kernel.
//
// The error is non-nil only when no cell could be attempted: a bad request
// (ErrBadRequest), a closed pool (ErrClosed), the kernel cap with every
// kernel busy (ErrCapacity) or a failed spawn (ErrSpawn). Everything that
// happens to the cell itself (exception, timeout, cancel, sys.exit, death)
// is a Result.
func (p *Pool) Execute(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	rq, err := p.normalize(req)
	if err != nil {
		return nil, fmt.Errorf("execute: %w", err)
	}
	p.mu.Lock()
	err = p.takeCellLocked(rq.key.owner, start)
	p.mu.Unlock()
	if err != nil {
		return nil, p.refuse(rq, err)
	}
	m := &cellMeta{uid: -1}
	for {
		s, gone, err := p.enterFor(rq.key, rq.tools, &rq)
		p.teardownAll(gone)
		if err != nil {
			return nil, p.refuse(rq, err)
		}
		res, retry, err := p.executeOn(ctx, s, rq, start, m)
		p.leave(s)
		if !retry {
			if res != nil {
				p.observeCell(rq, start, m, res)
			}
			return res, err
		}
	}
}

// refuse reports a request refused before it ran and wraps its error.
func (p *Pool) refuse(rq normalized, err error) error {
	switch {
	case errors.Is(err, ErrQuota):
		p.obs.Refused(rq.key.mode, RefusedQuota)
		p.log.Info("request refused", "owner", rq.key.owner, "mode", rq.key.mode, "reason", RefusedQuota, "error", err)
	case errors.Is(err, ErrCapacity):
		p.obs.Refused(rq.key.mode, RefusedCapacity)
	}
	return fmt.Errorf("execute: %w", err)
}

// executeOn waits for s's turn and runs the cell. retry is true when s
// left the registry while the caller waited (owner shutdown, kill): the
// caller then starts over on a fresh slot.
func (p *Pool) executeOn(ctx context.Context, s *slot, rq normalized, start time.Time, m *cellMeta) (_ *Result, retry bool, _ error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return waitAbandoned(rq, start), false, nil
	}
	defer func() { <-s.sem }()
	if ctx.Err() != nil {
		// Both were ready; the caller has gone, so the kernel is not touched.
		return waitAbandoned(rq, start), false, nil
	}
	p.mu.Lock()
	removed, closing, lv := s.removed, p.closing, s.live
	p.mu.Unlock()
	switch {
	case closing:
		return nil, false, fmt.Errorf("execute: %w", ErrClosed)
	case removed:
		return nil, true, nil
	}

	// A spare claimed for this key (enterFor) is bound before anything
	// else; when it cannot be, the key's kernel starts cold below.
	fresh := false
	if lv != nil && lv.spare {
		var res *Result
		var err error
		if lv, res, err = p.bindSpare(ctx, s, lv, rq, start); res != nil || err != nil {
			return res, false, err
		}
		fresh = lv != nil
	}
	if lv != nil && !fresh && !rq.reset && !lv.dead() {
		if why := conflict(rq, lv); why != "" {
			return nil, false, fmt.Errorf("execute: %w: %s; pass reset to restart it with the request's (its state is lost)", ErrConflict, why)
		}
	}
	stateReset := false
	if lv != nil && !fresh && (rq.reset || lv.dead()) {
		reason := reasonReset
		if !rq.reset {
			reason = reasonDead
		}
		p.discard(s, lv, reason)
		lv, stateReset = nil, true
	}
	for attempt := 0; ; attempt++ {
		reused := lv != nil && !fresh
		if lv == nil {
			var res *Result
			var err error
			lv, res, err = p.spawnInto(ctx, s, rq, start, stateReset)
			if lv == nil {
				return res, false, err
			}
			fresh = true
		}
		c := &cell{p: p, s: s, lv: lv, rq: rq, use: kernelUse{reused: reused, stateReset: stateReset}, m: m, start: start}
		res, f, err := c.runAttached(ctx, fresh)
		if err != nil {
			return nil, false, err
		}
		fresh = false
		if !f.retry || attempt > 0 {
			return res, false, nil
		}
		// The kernel had died between cells (Exec found it closed before
		// writing the cell): its state is lost, run the cell on a fresh one.
		lv, stateReset = nil, true
	}
}

// spawnInto starts a kernel for s and attaches it. When the slot was
// removed during the spawn (owner shutdown, Close) the new kernel is torn
// down and the cell reported as interrupted; when the caller's ctx ended
// during the spawn the cell is reported as interrupted too.
func (p *Pool) spawnInto(ctx context.Context, s *slot, rq normalized, start time.Time, stateReset bool) (*live, *Result, error) {
	// Register the spawn under the lock, so Close (which sets closing under
	// the same lock before it waits) never misses one.
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return nil, nil, fmt.Errorf("execute: %w", ErrClosed)
	}
	p.spawns.Add(1)
	p.mu.Unlock()
	defer p.spawns.Done()
	// Close's kill phase cancels spawns still starting up.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.killCtx, cancel)
	defer stop()
	lv, err := p.spawn(sctx, rq)
	if err != nil {
		p.mu.Lock()
		p.stats.SpawnFailures++
		p.mu.Unlock()
		p.obs.SpawnFailed(rq.key.mode)
		switch {
		case ctx.Err() != nil:
			return nil, interruptedResult(rq, start, "canceled by the caller", nil, kernelUse{stateReset: stateReset}), nil
		case p.killCtx.Err() != nil:
			return nil, nil, fmt.Errorf("execute: %w", ErrClosed)
		}
		return nil, nil, fmt.Errorf("execute: %w", err)
	}
	p.mu.Lock()
	p.stats.KernelsStarted++
	var doom teardownReason
	lv.observed = true
	if s.removed {
		doom = s.doom
	} else {
		s.live = lv
		p.byID[lv.id] = s
	}
	p.mu.Unlock()
	p.log.Info("kernel started", "id", lv.id, "owner", lv.owner, "mode", lv.mode, "pid", lv.pid, "uid", lv.uid)
	p.obs.KernelStarted(lv.mode)
	if doom != "" {
		p.teardown(lv, doom)
		return nil, interruptedResult(rq, start, string(doom), lv, kernelUse{stateReset: stateReset}), nil
	}
	return lv, nil, nil
}

// discard detaches lv from s and tears it down.
func (p *Pool) discard(s *slot, lv *live, reason teardownReason) {
	p.mu.Lock()
	p.detachLocked(s, lv)
	if reason == reasonReset {
		p.stats.Resets++
	}
	p.mu.Unlock()
	p.teardown(lv, reason)
}

// count applies f to the counters under the lock.
func (p *Pool) count(f func(*PoolStats)) {
	p.mu.Lock()
	f(&p.stats)
	p.mu.Unlock()
}
