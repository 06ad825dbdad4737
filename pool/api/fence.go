package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/kernpool/kernpool/pool"
)

// HeaderOwnerGeneration carries the owner's placement generation from a
// fleet's router to the node it placed the owner on (docs/fleet.md,
// "Fencing"). Requests without it (a client talking to the node
// directly) are not fenced.
const HeaderOwnerGeneration = "Kernpool-Owner-Generation"

// fenceOwner applies the request's owner generation, if it carries one:
// an older generation than the node has seen is answered 409 fenced
// (the router rereads its record and sends the request to the owner's
// node); a newer one drops the owner's kernels here (Pool.Fence).
// It reports whether it answered.
func (s *Server) fenceOwner(w http.ResponseWriter, r *http.Request, owner string) bool {
	h := r.Header.Get(HeaderOwnerGeneration)
	if h == "" {
		return false
	}
	gen, err := strconv.ParseUint(h, 10, 64)
	if err == nil {
		err = s.checkPlacement(r, owner, gen)
	}
	if err == nil {
		err = s.pool.Fence(owner, gen)
	} else if !errors.Is(err, pool.ErrFenced) && !errors.Is(err, errPlacementUnknown) {
		err = fmt.Errorf("%w: %s %q is not a generation number", pool.ErrBadRequest, HeaderOwnerGeneration, h)
	}
	switch {
	case err == nil:
		return false
	case errors.Is(err, pool.ErrFenced):
		writeError(w, http.StatusConflict, CodeFenced, err.Error())
	case errors.Is(err, errPlacementUnknown):
		w.Header().Set("Retry-After", retryAfterSeconds)
		writeError(w, http.StatusServiceUnavailable, CodeNoNode, err.Error())
	default:
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
	}
	return true
}

// errPlacementUnknown: the node could not read the owner's record.
var errPlacementUnknown = errors.New("the owner's placement record cannot be read")

// checkPlacement vets each generation of owner against the fleet's
// record (ServerConfig.Placement, a cache the node's watch on the
// records keeps current): a generation other than the record's, or a
// record that names another node, is fenced. So neither a node that
// comes back (and remembers no generation) nor one the owner was moved
// off runs the owner for a router whose view is older than the move.
func (s *Server) checkPlacement(r *http.Request, owner string, gen uint64) error {
	if s.cfg.Placement == nil || gen == 0 {
		return nil
	}
	cur, here, err := s.cfg.Placement(r.Context(), owner)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", errPlacementUnknown, err)
	case !here || cur != gen:
		return fmt.Errorf("owner %q generation %d (the fleet's record: generation %d, on this node: %v): %w", owner, gen, cur, here, pool.ErrFenced)
	}
	return nil
}
