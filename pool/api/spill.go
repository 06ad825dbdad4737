package api

import (
	"io"
	"net/http"
	"strconv"
)

// handleSpill serves GET /v1/kernels/{id}/spill/{name}: the full
// (redacted) stdout a cell of the live kernel id spilled to name.
func (s *Server) handleSpill(w http.ResponseWriter, r *http.Request) {
	if s.hideKernel(w, r, r.PathValue("id")) {
		return
	}
	f, err := s.pool.OpenSpill(r.PathValue("id"), r.PathValue("name"))
	if err != nil {
		s.writePoolError(w, err)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	if fi, err := f.Stat(); err == nil {
		h.Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = io.Copy(w, f) // the client may be gone; nothing to do
}
