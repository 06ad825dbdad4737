package kernel

import (
	"context"
	"errors"
)

// Kernel is one live Python kernel. Skeleton: the real implementation follows.
type Kernel struct {
	id   string
	done chan struct{}
}

// Start spawns a kernel per spec. ctx bounds only the start-up.
func Start(ctx context.Context, spec Spec) (*Kernel, error) {
	return nil, errors.New("kernel: start: not implemented yet")
}

// Exec runs one cell.
func (k *Kernel) Exec(ctx context.Context, cell Cell) (*Reply, error) { return nil, ErrClosed }

// Kill kills the kernel; idempotent and concurrent-safe.
func (k *Kernel) Kill() error { return nil }

// Done is closed once the kernel is dead and released.
func (k *Kernel) Done() <-chan struct{} { return k.done }

// Err says why the kernel died; nil while alive.
func (k *Kernel) Err() error { return nil }

// ID is the kernel's id.
func (k *Kernel) ID() string { return k.id }

// Pid is the kernel process id.
func (k *Kernel) Pid() int { return 0 }

// StagingDir is the kernel's staging directory.
func (k *Kernel) StagingDir() string { return "" }

// Stats reads live figures from the sandbox.
func (k *Kernel) Stats() (Stats, error) { return Stats{}, nil }

// Verdict is the sandbox's verdict after death.
func (k *Kernel) Verdict() Verdict { return Verdict{} }
