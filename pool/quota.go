package pool

import (
	"fmt"
	"math"
	"time"
)

// QuotaError is the error of a request refused by a per-owner quota.
// errors.Is(err, ErrQuota) holds; the API answers 429 with Retry-After.
type QuotaError struct {
	// Owner is the refused owner.
	Owner string
	// Quota names the quota: "max_kernels_per_owner" or
	// "max_cells_per_minute_per_owner".
	Quota string
	// Limit is the quota's value.
	Limit int
	// RetryAfter is when a retry may succeed (at least one second).
	RetryAfter time.Duration
	// allBusy: every kernel of the owner runs a cell (kernel quota), so
	// none is due to be reaped.
	allBusy bool
}

// Error says what frees the quota: for the kernel quota that is ending one
// of the owner's kernels (waiting means until an idle one is reaped, which
// may be the whole idle timeout), for the cell rate the time to wait.
func (e *QuotaError) Error() string {
	if e.Quota != quotaKernels {
		return fmt.Sprintf("owner %q is over its quota %s = %d; retry in %s", e.Owner, e.Quota, e.Limit, e.RetryAfter)
	}
	wait := fmt.Sprintf("or wait until its next idle kernel is reaped (in %s)", e.RetryAfter)
	if e.allBusy {
		wait = "all of them are running cells now"
	}
	return fmt.Sprintf("owner %q already has %d live kernels, its quota %s: shut one of them down "+
		"(kernpool kill KERNEL_ID; kernpool ps lists them), %s", e.Owner, e.Limit, e.Quota, wait)
}

// Is makes errors.Is(err, ErrQuota) hold.
func (e *QuotaError) Is(target error) bool { return target == ErrQuota }

// Quota names (the config attributes).
const (
	quotaKernels = "max_kernels_per_owner"
	quotaCells   = "max_cells_per_minute_per_owner"
)

// bucket is one owner's token bucket of cells.
type bucket struct {
	tokens float64
	at     time.Time
}

// SetQuotas replaces the per-owner quotas (SIGHUP); they apply from the
// next request on. Existing kernels over a lowered kernel quota stay.
func (p *Pool) SetQuotas(q Quotas) error {
	if q.MaxKernelsPerOwner < 0 || q.MaxCellsPerMinutePerOwner < 0 {
		return fmt.Errorf("set quotas: must not be negative: %w", ErrBadRequest)
	}
	p.mu.Lock()
	p.quotas = q
	p.mu.Unlock()
	return nil
}

// takeCellLocked spends one of owner's cell tokens, or returns the
// QuotaError saying when the next one is due.
func (p *Pool) takeCellLocked(owner string, now time.Time) error {
	limit := p.quotas.MaxCellsPerMinutePerOwner
	if limit <= 0 {
		return nil
	}
	rate := float64(limit) / float64(time.Minute) // tokens per nanosecond
	b := p.buckets[owner]
	if b == nil {
		b = &bucket{tokens: float64(limit), at: now}
		p.buckets[owner] = b
	}
	b.tokens = min(float64(limit), b.tokens+float64(now.Sub(b.at))*rate)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return nil
	}
	wait := time.Duration(math.Ceil((1 - b.tokens) / rate))
	return &QuotaError{Owner: owner, Quota: quotaCells, Limit: limit, RetryAfter: atLeastSecond(wait)}
}

// pruneBucketsLocked forgets owners whose bucket has refilled: a full
// bucket is the same as none, so the map stays as small as the set of
// recently active owners.
func (p *Pool) pruneBucketsLocked(now time.Time) {
	limit := p.quotas.MaxCellsPerMinutePerOwner
	for owner, b := range p.buckets {
		if limit <= 0 || now.Sub(b.at) >= time.Minute {
			delete(p.buckets, owner)
		}
	}
}

// kernelQuotaLocked refuses a new kernel for an owner that has
// MaxKernelsPerOwner already; RetryAfter is when its soonest idle kernel
// is reaped (one second when all are busy).
func (p *Pool) kernelQuotaLocked(owner string, now time.Time) error {
	limit := p.quotas.MaxKernelsPerOwner
	if limit <= 0 {
		return nil
	}
	n, wait := 0, time.Duration(math.MaxInt64)
	for _, s := range p.slots {
		if s.key.owner != owner {
			continue
		}
		n++
		if s.users == 0 {
			wait = min(wait, s.lastUsed.Add(p.cfg.IdleTimeout).Sub(now))
		}
	}
	if n < limit {
		return nil
	}
	allBusy := wait == time.Duration(math.MaxInt64)
	if allBusy {
		wait = time.Second
	}
	return &QuotaError{Owner: owner, Quota: quotaKernels, Limit: limit, RetryAfter: atLeastSecond(wait), allBusy: allBusy}
}

// atLeastSecond rounds d up to whole seconds, at least one (Retry-After).
func atLeastSecond(d time.Duration) time.Duration {
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}
