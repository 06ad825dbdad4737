package pool

import (
	"context"
	"fmt"
)

// Pool is the registry of live session kernels. Safe for concurrent use.
type Pool struct {
	cfg Config
}

// New validates cfg, fills its defaults and starts the idle reaper.
func New(cfg Config) (*Pool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Pool{cfg: cfg}, nil
}

// Execute runs one cell in the kernel of req's key.
func (p *Pool) Execute(ctx context.Context, req Request) (*Result, error) {
	return nil, fmt.Errorf("pool: execute: not implemented yet: %w", ErrClosed)
}

// List describes every live kernel, sorted by owner then id.
func (p *Pool) List() []KernelInfo { return nil }

// ShutdownOwner kills every kernel of owner and returns how many.
func (p *Pool) ShutdownOwner(owner string) int { return 0 }

// Kill kills one kernel by id.
func (p *Pool) Kill(id string) error { return fmt.Errorf("pool: kill %q: %w", id, ErrNotFound) }

// Close drains and kills every kernel. Idempotent.
func (p *Pool) Close(ctx context.Context) error { return nil }

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats { return PoolStats{} }
