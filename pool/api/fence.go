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
		err = s.pool.Fence(owner, gen)
	} else {
		err = fmt.Errorf("%w: %s %q is not a generation number", pool.ErrBadRequest, HeaderOwnerGeneration, h)
	}
	switch {
	case err == nil:
		return false
	case errors.Is(err, pool.ErrFenced):
		writeError(w, http.StatusConflict, CodeFenced, err.Error())
	default:
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
	}
	return true
}
