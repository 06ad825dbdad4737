package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/kernpool/kernpool/kernel"
)

// TimeoutAction is what a cell timeout does to its kernel.
type TimeoutAction string

// The timeout actions (a profile's timeout_action).
const (
	// TimeoutInterrupt interrupts the cell (KeyboardInterrupt) and keeps
	// the kernel's state when the cell ends within the grace.
	TimeoutInterrupt TimeoutAction = "interrupt"
	// TimeoutKill kills the kernel at once: its state is deliberately lost
	// (the reference design's behaviour).
	TimeoutKill TimeoutAction = "kill"
)

// CellPolicy is how one mode's cells are stopped.
type CellPolicy struct {
	// TimeoutAction is what a timeout does ("" means TimeoutInterrupt).
	// An explicit interrupt and a disconnected client always interrupt
	// first.
	TimeoutAction TimeoutAction
	// InterruptGrace is how long an interrupted cell may take to end
	// before its kernel is killed (0: kernel.DefaultInterruptGrace).
	InterruptGrace time.Duration
	// Persist checkpoints the mode's kernels when the pool stops them
	// (eviction, idle reaping, Close) and restores the checkpoint into the
	// key's next kernel (CheckpointConfig; docs/design.md).
	Persist bool
	// FilesMaxBytes caps one upload through the files API (0:
	// DefaultFilesMaxBytes).
	FilesMaxBytes int64
}

// ParseTimeoutAction checks a configured timeout action.
func ParseTimeoutAction(s string) (TimeoutAction, error) {
	switch a := TimeoutAction(s); a {
	case TimeoutInterrupt, TimeoutKill:
		return a, nil
	}
	return "", fmt.Errorf("timeout action %q is neither %q nor %q: %w", s, TimeoutInterrupt, TimeoutKill, ErrBadRequest)
}

// checkPolicies validates the cell policies of Config.Policies and
// SetPolicies.
func checkPolicies(policies map[string]CellPolicy) error {
	for mode, pol := range policies {
		if a := pol.TimeoutAction; a != "" && a != TimeoutInterrupt && a != TimeoutKill {
			return fmt.Errorf("mode %q: timeout action %q is neither %q nor %q: %w", mode, a, TimeoutInterrupt, TimeoutKill, ErrBadRequest)
		}
		if pol.InterruptGrace < 0 {
			return fmt.Errorf("mode %q: interrupt grace must not be negative: %w", mode, ErrBadRequest)
		}
	}
	return nil
}

// SetPolicies replaces the cell policies by mode (the daemon's SIGHUP
// reload): cells that start from now on time out and take their grace by
// the new ones, and kernels the pool stops from now on are checkpointed
// by the new Persist. A policy that does not validate is refused and
// nothing changes.
func (p *Pool) SetPolicies(policies map[string]CellPolicy) error {
	if err := checkPolicies(policies); err != nil {
		return fmt.Errorf("set policies: %w", err)
	}
	next := maps.Clone(policies)
	p.policies.Store(&next)
	return nil
}

// policy is mode's cell policy (its own, else the default's).
func (p *Pool) policy(mode string) CellPolicy {
	policies := *p.policies.Load()
	if pol, ok := policies[mode]; ok {
		return pol
	}
	return policies[defaultName]
}

// Interrupt interrupts the cell running on kernel id: KeyboardInterrupt
// in the cell, its other processes ended, the kernel killed if the cell
// does not end within the grace. ErrNotFound for an unknown id, ErrIdle
// when no cell runs on it.
func (p *Pool) Interrupt(id string) error {
	_, lv := p.liveByID(id)
	if lv == nil {
		return fmt.Errorf("interrupt %q: %w", id, ErrNotFound)
	}
	if err := lv.k.Interrupt(); err != nil {
		if errors.Is(err, kernel.ErrIdle) {
			return fmt.Errorf("interrupt %q: %w", id, ErrIdle)
		}
		return fmt.Errorf("interrupt %q: %w", id, ErrNotFound)
	}
	return nil
}

// InterruptOwner interrupts the running cells of owner's kernels (of one
// mode when mode is not empty) and returns the ids it interrupted.
func (p *Pool) InterruptOwner(owner, mode string) []string {
	if owner == "" {
		owner = defaultName
	}
	p.mu.Lock()
	var lives []*live
	for _, s := range p.slots {
		if s.key.owner == owner && (mode == "" || s.key.mode == mode) && s.live != nil {
			lives = append(lives, s.live)
		}
	}
	p.mu.Unlock()
	var ids []string
	for _, lv := range lives {
		if lv.k.Interrupt() == nil {
			ids = append(ids, lv.id)
		}
	}
	return ids
}

// Variables lists the user-defined names of kernel id's namespace.
// ErrNotFound for an unknown id, ErrBusy while a cell runs on it,
// ErrTimeout when ctx's deadline stopped the listing, ErrInterrupted when
// Interrupt did (kernel.Variables). Either way the kernel keeps its state
// unless the message says it was killed (a repr that ignored the
// interrupt past its grace); ctx's cancel wraps no pool sentinel.
// ErrKernelDied when the kernel died of its own during the listing (a
// repr's os._exit, the OOM killer: the message says which).
func (p *Pool) Variables(ctx context.Context, id string) (*Variables, error) {
	s, lv := p.liveByID(id)
	if lv == nil {
		return nil, fmt.Errorf("variables %q: %w", id, ErrNotFound)
	}
	// The slot's semaphore keeps cells out while the kernel lists; a
	// running or queued cell makes this a 409 rather than a wait.
	select {
	case s.sem <- struct{}{}:
	default:
		return nil, fmt.Errorf("variables %q: %w", id, ErrBusy)
	}
	defer func() { <-s.sem }()
	v, err := lv.k.Variables(ctx)
	if err != nil && lv.k.Err() != nil {
		p.listingEnded(s, lv, err)
	}
	switch {
	case errors.Is(err, kernel.ErrBusy):
		return nil, fmt.Errorf("variables %q: %w", id, ErrBusy)
	case errors.Is(err, kernel.ErrClosed):
		return nil, fmt.Errorf("variables %q: %w", id, ErrNotFound)
	case errors.Is(err, kernel.ErrTimeout):
		return nil, fmt.Errorf("variables %q: %w", id, classified{cause: err, class: ErrTimeout})
	case errors.Is(err, kernel.ErrInterrupted):
		// What stopped the listing is the answer, as for the deadline:
		// whether the kernel survived is kernel.Variables's to say, in
		// its message (a kill for the interrupt wraps the same cause).
		return nil, fmt.Errorf("variables %q: %w", id, classified{cause: err, class: ErrInterrupted})
	case errors.As(err, new(*kernel.DeathError)):
		// The tenant's repr ended the kernel, as a cell's death is the
		// cell's; kernel.Variables words it (the OOM killer named).
		return nil, fmt.Errorf("variables %q: %w", id, classified{cause: err, class: ErrKernelDied})
	case err != nil:
		return nil, fmt.Errorf("variables %q: %w", id, err)
	}
	for i := range v.Variables {
		v.Variables[i].Repr = lv.filter.Clean(v.Variables[i].Repr)
	}
	return v, nil
}

// listingEnded ends a kernel that a listing left dead (killed past its
// interrupt grace or the deadline, or dead of its own) as a cell's would
// be: endOf decides and counts, settle takes it out of the registry and
// tears it down; unless a pool operation doomed it: that operation does
// both. The caller holds s's semaphore.
func (p *Pool) listingEnded(s *slot, lv *live, err error) {
	p.mu.Lock()
	doomed := s.doom != ""
	p.mu.Unlock()
	if doomed {
		return
	}
	p.settle(s, lv, fate{reason: p.endOf(lv, err)})
}

// liveByID returns the slot and live kernel of id (lv nil: none).
func (p *Pool) liveByID(id string) (*slot, *live) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.byID[id]
	if s == nil {
		return nil, nil
	}
	return s, s.live
}
