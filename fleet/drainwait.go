package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kernpool/kernpool/pool/api"
)

const (
	// DefaultSaveWait bounds a request's wait for a draining node to
	// save its owner: past a drain's grace, interrupt grace and save.
	DefaultSaveWait = 5 * time.Minute
	// savePoll is how often a waiting request reads the owner's record;
	// every refusePolls polls it also dials the node, which answers no
	// more once it died (its heartbeat takes three beats to expire).
	savePoll    = 20 * time.Millisecond
	refusePolls = 10
)

// errSaveWait: the draining node did not save the owner in SaveWait.
var errSaveWait = errors.New("the owner's node is still saving its state")

// awaitSave returns once node, which answered draining for owner, no
// longer holds state of the owner that it will save (docs/fleet.md,
// "Drain in a fleet"): its record does not say saving (the node marks
// it so before it refuses the owner's cell, and saved once the save is
// stored), or no longer names node, or node is gone: its heartbeat
// expired or it withdrew, or it refuses connections (it died
// mid-drain: the owner then restores its last save, as after a kill).
// Placing the owner elsewhere before that would restore an older save
// and lose what the drain saves.
func (r *Router) awaitSave(ctx context.Context, owner string, node Node) error {
	deadline := time.Now().Add(r.cfg.SaveWait)
	logged := false
	for poll := 0; ; poll++ {
		rec, ok, err := r.cfg.Registry.Owner(ctx, owner)
		if err != nil {
			return err
		}
		if !ok || rec.Node != node.Name || rec.State != OwnerSaving {
			return nil
		}
		ns, err := r.liveNodes(ctx, false)
		if err != nil {
			return err
		}
		if _, live := findNode(ns, node.Name); !live || poll%refusePolls == refusePolls-1 && r.refuses(ctx, node) {
			r.log.Warn("owner's draining node went away before it saved the owner: its last save is restored", "owner", owner, "node", node.Name)
			return nil
		}
		if !logged {
			r.log.Info("owner's node drains: waiting for it to save the owner", "owner", owner, "node", node.Name)
			logged = true
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("owner %q on node %s: %w after %s", owner, node.Name, errSaveWait, r.cfg.SaveWait)
		}
		t := time.NewTimer(savePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// saveWaitError answers a request whose owner's draining node did not
// save it in time (503, retry: the owner is not moved meanwhile), or
// whose wait failed.
func (r *Router) saveWaitError(w http.ResponseWriter, owner string, err error) {
	if errors.Is(err, context.Canceled) {
		return // the client went away
	}
	if errors.Is(err, errSaveWait) {
		w.Header().Set("Retry-After", "1")
		api.WriteError(w, http.StatusServiceUnavailable, api.CodeNoNode, err.Error())
		return
	}
	r.registryError(w, owner, err)
}
