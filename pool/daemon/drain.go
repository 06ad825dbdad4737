package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/kernpool/kernpool/pool/api"
)

// drainLogEvery is how often a running drain logs its progress;
// interruptPoll how often a drain past its grace looks whether the
// interrupted cells stopped.
const (
	drainLogEvery = time.Second
	interruptPoll = 20 * time.Millisecond
)

// Drain starts a drain (docs/fleet.md; idempotent): the node refuses
// cells with 503 "draining" and Retry-After, /v1/ready answers 503, and
// the program serving the daemon is told (DrainRequested) to call
// Shutdown, whose pool close lets running cells finish within its grace
// and saves every persist kernel. POST /v1/drain calls it, as does
// SIGTERM under drain_on_term.
func (d *Daemon) Drain() {
	if d.handler.BeginDrain() {
		d.log.Info("drain started: cells are refused, persist kernels will be saved", "to_save", d.pool.PendingSaves())
	}
	d.requestDrain()
}

// requestDrain tells the serving program to shut down (once).
func (d *Daemon) requestDrain() { d.drainOnce.Do(func() { close(d.drainReq) }) }

// DrainRequested is closed once a drain was asked for (Drain, or POST
// /v1/drain): the serving program then calls Shutdown with the grace.
func (d *Daemon) DrainRequested() <-chan struct{} { return d.drainReq }

// DrainStatus is the drain's progress (state "drained" and the final
// counts after Shutdown).
func (d *Daemon) DrainStatus() api.DrainStatus { return d.handler.DrainStatus() }

// DrainError is nil unless a drain ran and left a persist kernel unsaved.
func (d *Daemon) DrainError() error {
	st := d.handler.DrainStatus()
	if st.State != api.StateDrained || st.Failed == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d of %d persist kernels were not saved (the log says why)", ErrDrainIncomplete, st.Failed, st.KernelsToSave)
}

// logDrainProgress logs a running drain's progress every second until
// the returned stop is called; a no-op outside a drain.
func (d *Daemon) logDrainProgress() (stop func()) {
	if d.handler.State() != api.StateDraining {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(drainLogEvery)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				st := d.handler.DrainStatus()
				d.log.Info("draining", "cells_running", st.CellsRunning, "saved", st.Saved, "failed", st.Failed, "remaining", st.Remaining)
			}
		}
	}()
	return func() { close(quit); <-done }
}

// interruptPastGrace is the context a drain closes the pool with: when
// grace (ctx) ends with cells still running, they are interrupted first
// (KeyboardInterrupt; the kernel keeps its state) and get the default
// profile's interrupt_grace to stop, so their kernels are idle, and
// saved, when the pool closes; only a cell that does not stop is then
// killed and its state lost. Outside a drain it is ctx: the plain
// shutdown kills at the end of the grace as it always did.
func (d *Daemon) interruptPastGrace(ctx context.Context) context.Context {
	if d.handler.State() != api.StateDraining {
		return ctx
	}
	closeCtx, cancel := context.WithCancel(context.Background())
	go func() {
		defer cancel()
		select {
		case <-ctx.Done():
		case <-d.done:
			return
		}
		var ids []string
		for _, k := range d.pool.List() {
			if k.Busy && d.pool.Interrupt(k.ID) == nil {
				ids = append(ids, k.ID)
			}
		}
		if len(ids) == 0 {
			return
		}
		wait := d.rl.current().Profiles[DefaultProfile].InterruptGrace
		d.log.Warn("drain grace over; interrupting the running cells so their kernels can be saved", "kernels", len(ids), "wait", wait.String())
		deadline := time.Now().Add(wait)
		for d.pool.Stats().KernelsBusy > 0 && time.Now().Before(deadline) {
			time.Sleep(interruptPoll)
		}
	}()
	return closeCtx
}
