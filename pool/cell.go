package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kernpool/kernpool/kernel"
)

// kernelUse is how a cell came by its kernel, as its Result reports it.
type kernelUse struct {
	// reused: the kernel ran an earlier cell of the key.
	reused bool
	// stateReset: the key's earlier kernel (and its state) was discarded
	// for this cell (reset, or it had died).
	stateReset bool
}

// fate is what becomes of a cell's kernel once the cell settled: the one
// decision, made by cell.decide, that Pool.settle carries out.
type fate struct {
	// reason is why the kernel is torn down; "" keeps it, with its state.
	reason teardownReason
	// retry: the kernel was dead before the cell was written (nothing
	// ran, no pool operation killed it): run the cell on a fresh kernel.
	retry bool
}

// cell is one cell on one kernel. run executes its phases in order (exec,
// record, decide, write) and returns the Result and the kernel's fate.
type cell struct {
	p   *Pool
	s   *slot
	lv  *live
	rq  normalized
	use kernelUse
	m   *cellMeta
	// start is when the call began (the Result's duration counts from it).
	start time.Time

	// Learned by exec and record.
	reply *kernel.Reply // nil when Exec returned no reply
	err   error         // Exec's error; nil when the runner answered
	calls int           // tool calls the cell made
	doom  teardownReason
	count int // execution_count to report
}

// run runs the cell and settles it: the Result, and the fate of its kernel.
func (c *cell) run(ctx context.Context) (*Result, fate) {
	c.exec(ctx)
	c.record()
	f := c.decide(ctx)
	return c.write(ctx, f), f
}

// exec runs the code on the kernel under the cell's timeout, with the
// cell's tool authority and live stream while it runs.
func (c *cell) exec(ctx context.Context) {
	cellCtx, cancel := context.WithTimeout(ctx, c.rq.timeout)
	defer cancel()
	var end func() int
	if c.lv.tools != nil {
		c.m.tools = &cellTools{h: c.rq.handler}
		end = c.lv.tools.BeginCell(c.m.tools, c.rq.budget)
	}
	pol := c.p.policy(c.rq.key.mode)
	kc := kernel.Cell{Code: c.rq.code, Grace: pol.InterruptGrace, KillOnTimeout: pol.TimeoutAction == TimeoutKill, Env: c.rq.cellEnv}
	var st *streamer
	if c.rq.stream != nil {
		st = newStreamer(c.lv.filter, c.rq.stream)
		kc.Stream = st.add
	}
	c.reply, c.err = c.lv.k.Exec(cellCtx, kc)
	if st != nil {
		st.finish()
	}
	c.m.noteReply(c.reply)
	c.m.between = c.lv.takeBetween()
	if c.err == nil && (c.reply == nil || !c.reply.Status.Known()) {
		status := kernel.ReplyStatus("<none>")
		if c.reply != nil {
			status = c.reply.Status
		}
		c.err = fmt.Errorf("%w: unknown cell status %q", kernel.ErrProtocol, status)
	}
	if end != nil {
		c.calls = end()
	}
}

// record counts the cell and notes, under the registry lock, whether a
// pool operation doomed the kernel while the cell ran.
func (c *cell) record() {
	c.p.mu.Lock()
	c.doom = c.s.doom
	c.p.stats.Cells++
	c.lv.cells++ // the state may have changed: an idle save is due
	prev := c.lv.execCount
	if c.reply != nil && c.err == nil {
		c.lv.execCount = c.reply.ExecutionCount
	}
	c.s.lastUsed = time.Now()
	c.p.mu.Unlock()
	c.count = prev + 1
	if c.reply != nil && c.reply.ExecutionCount > 0 {
		c.count = c.reply.ExecutionCount
	}
}

// decide is the one place that decides the kernel's fate, from what the
// cell learned: an answered cell keeps its kernel unless it called
// sys.exit; a pool operation's doom, the caller going away, an interrupt
// or timeout that outlived its grace, a death, a broken protocol or a
// kernel dead before the cell end it. A kernel found closed before the
// cell, with no pool operation or caller behind it, is worth a retry.
func (c *cell) decide(ctx context.Context) fate {
	f := c.verdict(ctx)
	f.retry = f.reason != "" && errors.Is(c.err, kernel.ErrClosed) && c.doom == "" && ctx.Err() == nil
	return f
}

// verdict picks the teardown reason (none: the kernel lives on) and counts
// the outcome.
func (c *cell) verdict(ctx context.Context) fate {
	if c.err == nil {
		if c.reply.Status == kernel.ReplyExit {
			c.p.count(func(st *PoolStats) { st.Ended++ })
			return fate{reason: reasonExit}
		}
		return fate{}
	}
	switch {
	case c.doom != "":
		c.p.count(func(st *PoolStats) { st.Interrupted++ })
		return fate{reason: c.doom}
	case ctx.Err() != nil:
		c.p.count(func(st *PoolStats) { st.Interrupted++ })
		return fate{reason: reasonCanceled}
	case errors.Is(c.err, kernel.ErrBusy):
		// Cannot happen while the slot's semaphore serializes cells; the
		// kernel is alive and keeps its state.
		c.p.log.Error("kernel reported busy under the slot semaphore", "id", c.lv.id)
		return fate{}
	}
	return fate{reason: c.p.endOf(c.lv, c.err)}
}

// endOf decides what ended lv, as its exchange (a cell or a listing)
// reports it in err, and counts it: the one place a kernel's death, kill
// for an interrupt or timeout, or broken protocol becomes a teardown
// reason and a stat. ErrClosed (died between exchanges) or anything else:
// the kernel is dead.
func (p *Pool) endOf(lv *live, err error) teardownReason {
	var death *kernel.DeathError
	switch {
	case errors.Is(err, kernel.ErrCanceled):
		p.count(func(st *PoolStats) { st.Interrupted++ })
		return reasonCanceled
	case errors.Is(err, kernel.ErrInterrupted):
		p.count(func(st *PoolStats) { st.Interrupted++ })
		return reasonInterrupted
	case errors.Is(err, kernel.ErrTimeout):
		p.count(func(st *PoolStats) { st.Timeouts++ })
		return reasonTimeout
	case errors.As(err, &death):
		if death.OOMKilled || lv.k.Verdict().OOMKilled {
			p.count(func(st *PoolStats) { st.Died++; st.OOMKilled++ })
			return reasonOOM
		}
		p.count(func(st *PoolStats) { st.Died++ })
		return reasonDied
	case errors.Is(err, kernel.ErrProtocol):
		return reasonProtocol
	}
	return reasonDead
}

// write assembles the Result the fate calls for (result.go words it).
func (c *cell) write(ctx context.Context, f fate) *Result {
	cs := cellState{rq: c.rq, lv: c.lv, start: c.start, use: c.use, calls: c.calls, reply: c.reply, count: c.count, m: c.m}
	if c.err == nil {
		return c.p.settled(cs)
	}
	return c.p.failed(ctx, cs, c.err, f.reason)
}

// runAttached runs the cell on its kernel, which is attached to the
// cell's slot, and carries out the fate the cell decides. A fresh kernel
// (cold or a bound spare) has run none of the key's cells: the place for
// a step that must precede the key's first cell (persist's restore).
func (c *cell) runAttached(ctx context.Context, fresh bool) (*Result, fate, error) {
	p, lv, rq := c.p, c.lv, c.rq
	var restored *restoreNote
	if fresh {
		restored = p.restore(ctx, lv, rq)
	}
	c.m.uid = lv.uid
	if err := p.maskCellEnv(lv, rq.cellEnv); err != nil {
		return nil, fate{}, fmt.Errorf("execute: %w", err)
	}
	outs := p.outputsBefore(lv, rq)
	res, f := c.run(ctx)
	outs.apply(res)
	p.settle(c.s, lv, f)
	restored.apply(res)
	if note := p.toolSetNote(rq, c.use.reused || c.use.stateReset); note != "" && res != nil {
		res.Warning = strings.TrimSpace(res.Warning + " " + note)
	}
	c.m.takeRedactions(lv.filter) // still under the slot's semaphore
	return res, f, nil
}

// settle carries out the fate of a cell's or a listing's kernel: one that
// does not live on is detached from its slot, which leaves the registry
// when no caller uses it (a listing is not one), and torn down (teardown
// checkpoints it first where the mode persists).
func (p *Pool) settle(s *slot, lv *live, f fate) {
	if f.reason == "" {
		return
	}
	p.mu.Lock()
	p.detachLocked(s, lv)
	p.dropUnusedLocked(s)
	p.mu.Unlock()
	p.teardown(lv, f.reason)
}
