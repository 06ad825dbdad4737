package fleet

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// markTimeout bounds one Mark of a SaveMarks' waiter (the request path's
// marks are bounded by their request).
const markTimeout = 10 * time.Second

// SaveMarks keeps a draining node's owner records honest about the
// state it still holds (docs/fleet.md, "Drain in a fleet"). When the
// node refuses an owner's routed cell while its pool still holds state
// of the owner that the drain will save, Saving marks the owner's
// record saving before the refusal goes out; a router that reads that
// waits, rather than placing the owner on a node whose restore would
// load an older save. Once the pool saved the owner (Wait returned),
// the record is marked saved and the routers move the owner. If this
// node dies first, the routers stop waiting when its heartbeat expires
// (the owner then restores its last save, as after a kill).
type SaveMarks struct {
	reg  Registry
	node string
	// wait returns once the pool no longer holds unsaved state of the
	// owner (pool.Pool.WaitOwnerSaved).
	wait func(ctx context.Context, owner string) error
	log  hclog.Logger

	mu      sync.Mutex
	waiting map[string]bool
	closed  bool // Wait began: the pool closed, nothing is left to save
	wg      sync.WaitGroup
}

// NewSaveMarks returns the marks of node; wait is the pool's
// WaitOwnerSaved.
func NewSaveMarks(reg Registry, node string, wait func(context.Context, string) error, log hclog.Logger) *SaveMarks {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &SaveMarks{reg: reg, node: node, wait: wait, log: log, waiting: map[string]bool{}}
}

// Saving marks owner's record saving (if it names this node) and, once
// per owner, waits in the background for the pool to save the owner,
// then marks it saved. api.ServerConfig.OwnerSaving.
func (m *SaveMarks) Saving(ctx context.Context, owner string) error {
	ok, err := m.reg.Mark(ctx, owner, m.node, OwnerSaving)
	if err != nil || !ok {
		return err // !ok: the record names another node, whose routers do not send the owner here
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		_, err := m.reg.Mark(ctx, owner, m.node, OwnerSaved)
		return err
	}
	if m.waiting[owner] {
		return nil
	}
	m.waiting[owner] = true
	m.wg.Go(func() {
		// The pool's close ends every save: this wait ends with it.
		_ = m.wait(context.Background(), owner)
		// Forgotten before the mark: a Saving that marks the record
		// saving again after this point starts its own waiter, so the
		// record never stays saving after the save.
		m.mu.Lock()
		delete(m.waiting, owner)
		m.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
		defer cancel()
		if _, err := m.reg.Mark(ctx, owner, m.node, OwnerSaved); err != nil {
			m.log.Warn("owner saved but its record not marked: routers wait until this node's registration ends", "owner", owner, "error", err)
			return
		}
		m.log.Info("owner saved by the drain: routers may move it", "owner", owner)
	})
	return nil
}

// Saved marks owner's record saved (if it names this node): the pool
// holds nothing unsaved of the owner. api.ServerConfig.OwnerSaved.
func (m *SaveMarks) Saved(ctx context.Context, owner string) error {
	_, err := m.reg.Mark(ctx, owner, m.node, OwnerSaved)
	return err
}

// Wait waits for the background marks (after the pool closed, before
// the registry does).
func (m *SaveMarks) Wait() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.wg.Wait()
}
