package api

import (
	"context"
	"net/http"

	"github.com/kernpool/kernpool/pool"
)

func (s *Server) handleInterrupt(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.hideKernel(w, r, id) {
		return
	}
	if err := s.pool.Interrupt(id); err != nil {
		s.writePoolError(w, err)
		return
	}
	s.log.Info("cell interrupted by API", "id", id)
	writeJSON(w, http.StatusOK, InterruptResponse{Interrupted: []string{id}})
}

func (s *Server) handleInterruptOwner(w http.ResponseWriter, r *http.Request) {
	owner := r.PathValue("owner")
	if owner == "" {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "owner must not be empty")
		return
	}
	if forbidOwner(w, r, owner) || s.fenceOwner(w, r, owner) {
		return
	}
	ids := s.pool.InterruptOwner(owner, r.URL.Query().Get("mode"))
	if ids == nil {
		ids = []string{}
	}
	s.log.Info("owner's cells interrupted by API", "owner", owner, "interrupted", len(ids))
	writeJSON(w, http.StatusOK, InterruptResponse{Interrupted: ids})
}

func (s *Server) handleVariables(w http.ResponseWriter, r *http.Request) {
	if s.hideKernel(w, r, r.PathValue("id")) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.VariablesTimeout)
	defer cancel()
	v, err := s.pool.Variables(ctx, r.PathValue("id"))
	if err != nil {
		s.writeVariablesError(w, r, r.PathValue("id"), err)
		return
	}
	if v.Variables == nil {
		v.Variables = []pool.Variable{}
	}
	writeJSON(w, http.StatusOK, v)
}

// writeVariablesError answers a listing of kernel id that failed. A
// client that went away interrupted it: that is logged as a cell whose
// client left is (handleExecute), not as a failure of the daemon, and
// the answer goes nowhere.
func (s *Server) writeVariablesError(w http.ResponseWriter, r *http.Request, id string, err error) {
	if r.Context().Err() == nil {
		s.writePoolError(w, err)
		return
	}
	s.log.Warn("client disconnected; its variables listing was interrupted", "kernel", id, "error", err)
	status, code := s.classify(err)
	writeError(w, status, code, err.Error())
}
