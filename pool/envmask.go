package pool

import (
	"slices"
	"time"
)

// A request env value a cell copied into a global travels with the
// kernel's state: a checkpoint brings the global back into the key's next
// kernel, whose filter must mask it too. keyMasks remembers, for the keys
// of modes that persist, every request env value their kernels mask,
// in memory only (a secret is never written into a checkpoint), and each
// new kernel of the key starts masking them (restore).

// maskEntry is one key's remembered values; touched is the last time a
// value was added or the key's state was stored.
type maskEntry struct {
	values  []string
	touched time.Time
}

// maskGrace is how long past the checkpoint retention an entry is kept:
// a checkpoint saved just after the entry's last touch still finds it.
const maskGrace = time.Hour

// rememberMasksLocked records values lv's filter masks from now on under
// lv's key, when the key's state may be restored into another kernel.
func (p *Pool) rememberMasksLocked(k key, values []string, now time.Time) {
	if k == (key{}) || !p.policy(k.mode).Persist {
		return
	}
	if p.keyMasks == nil {
		p.keyMasks = make(map[key]*maskEntry)
	}
	e := p.keyMasks[k]
	if e == nil {
		e = &maskEntry{}
		p.keyMasks[k] = e
	}
	for _, v := range values {
		if !slices.Contains(e.values, v) {
			e.values = append(e.values, v)
		}
	}
	e.touched = now
}

// seedMasks makes the fresh kernel lv of key k mask what k's earlier
// kernels masked (restore calls it before the key's first cell, under the
// slot's semaphore); reset forgets them with the state.
func (p *Pool) seedMasks(lv *live, k key, reset bool) {
	p.mu.Lock()
	var values []string
	if e := p.keyMasks[k]; e != nil {
		if reset {
			delete(p.keyMasks, k)
		} else {
			values = slices.Clone(e.values)
		}
	}
	p.mu.Unlock()
	var fresh []string
	for _, v := range values {
		if !slices.Contains(lv.secrets, v) {
			fresh = append(fresh, v)
		}
	}
	if len(fresh) == 0 {
		return
	}
	for _, v := range fresh {
		lv.maskedBytes += len(v)
	}
	lv.masked += len(fresh)
	lv.secrets = append(slices.Clip(lv.secrets), fresh...)
	lv.filter = p.filterFor(lv.secrets, lv.tools)
}

// touchMasks marks k's values as needed as long as the state just stored.
func (p *Pool) touchMasks(k key) {
	p.mu.Lock()
	if e := p.keyMasks[k]; e != nil {
		e.touched = time.Now()
	}
	p.mu.Unlock()
}

// forgetMasksWhere drops the entries of the keys match selects (their
// state was deleted: a kill, an owner's shutdown, a session's end).
func (p *Pool) forgetMasksWhere(match func(key) bool) {
	p.mu.Lock()
	for k := range p.keyMasks {
		if match(k) {
			delete(p.keyMasks, k)
		}
	}
	p.mu.Unlock()
}

// expireMasksLocked drops the entries whose state has expired from the
// store (the reaper's sweep).
func (p *Pool) expireMasksLocked(now time.Time) {
	for k, e := range p.keyMasks {
		if now.Sub(e.touched) > p.cfg.Checkpoints.Retention+maskGrace {
			delete(p.keyMasks, k)
		}
	}
}
