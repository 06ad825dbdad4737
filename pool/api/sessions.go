package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/kernpool/kernpool/pool"
)

// Explicit sessions (pool/sessions.go) over HTTP. A session is bound to
// its owner: a credential that may not act for that owner gets 404 for
// its id, as for a session that does not exist.

// CodeSessionMismatch (409): a request on a session names a mode,
// interpreter, cwd or tool set other than the session's.
const CodeSessionMismatch = "session_mismatch"

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Sessions []pool.SessionInfo `json:"sessions"`
}

// SessionDeleted is the body of DELETE /v1/sessions/{id}.
type SessionDeleted struct {
	Deleted string `json:"deleted"`
}

// SessionRestarted is the body of POST /v1/sessions/{id}/restart: the
// kernel it killed ("" when the session had none).
type SessionRestarted struct {
	Session string `json:"session"`
	Killed  string `json:"killed"`
}

// sessionRoutes are the session endpoints of the route table.
func (s *Server) sessionRoutes() []route {
	return []route{
		{http.MethodPost, "/v1/sessions", s.handleCreateSession},
		{http.MethodGet, "/v1/sessions", s.handleListSessions},
		{http.MethodGet, "/v1/sessions/{id}", s.handleGetSession},
		{http.MethodDelete, "/v1/sessions/{id}", s.handleDeleteSession},
		{http.MethodPost, "/v1/sessions/{id}/interrupt", s.handleInterruptSession},
		{http.MethodGet, "/v1/sessions/{id}/variables", s.handleSessionVariables},
		{http.MethodPost, "/v1/sessions/{id}/restart", s.handleRestartSession},
	}
}

func (s *Server) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	if s.refuseCell(w) {
		return
	}
	var spec pool.SessionSpec
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, s.cfg.BodyReadTimeout, &spec); err != nil {
		writeBodyError(w, err)
		return
	}
	if forbidOwner(w, r, spec.Owner) {
		return
	}
	if err := s.checkAccess(pool.Request{Interpreter: spec.Interpreter, Cwd: spec.Cwd}); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	info, err := s.pool.CreateSession(spec)
	if err != nil {
		s.writePoolError(w, err)
		return
	}
	s.log.Info("session created", "session", info.ID, "owner", info.Owner, "mode", info.Mode)
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request) {
	p, only := principalOf(r), r.URL.Query().Get("owner")
	list := s.pool.Sessions(func(owner string) bool {
		return p.Allows(owner) && (only == "" || owner == only)
	})
	writeJSON(w, http.StatusOK, SessionList{Sessions: list})
}

func (s *Server) handleGetSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.hideSession(w, r, id) {
		return
	}
	info, err := s.pool.Session(id)
	if err != nil {
		s.writePoolError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.hideSession(w, r, id) {
		return
	}
	if err := s.pool.DeleteSession(id); err != nil {
		s.writePoolError(w, err)
		return
	}
	s.log.Info("session deleted by API", "session", id)
	writeJSON(w, http.StatusOK, SessionDeleted{Deleted: id})
}

func (s *Server) handleRestartSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.hideSession(w, r, id) {
		return
	}
	killed, err := s.pool.RestartSession(id)
	if err != nil {
		s.writePoolError(w, err)
		return
	}
	s.log.Info("session restarted by API", "session", id, "killed", killed)
	writeJSON(w, http.StatusOK, SessionRestarted{Session: id, Killed: killed})
}

func (s *Server) handleInterruptSession(w http.ResponseWriter, r *http.Request) {
	kid, ok := s.sessionKernel(w, r, r.PathValue("id"))
	if !ok {
		return
	}
	if err := s.pool.Interrupt(kid); err != nil {
		s.writePoolError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, InterruptResponse{Interrupted: []string{kid}})
}

func (s *Server) handleSessionVariables(w http.ResponseWriter, r *http.Request) {
	kid, ok := s.sessionKernel(w, r, r.PathValue("id"))
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.VariablesTimeout)
	defer cancel()
	v, err := s.pool.Variables(ctx, kid)
	if err != nil {
		s.writeVariablesError(w, r, kid, err)
		return
	}
	if v.Variables == nil {
		v.Variables = []pool.Variable{}
	}
	writeJSON(w, http.StatusOK, v)
}

// sessionKernel resolves session id, for a caller that may act for its
// owner, to its live kernel's id: the hook of every endpoint that acts on
// a session's kernel. When it reports false it has answered: 404 for a
// session that does not exist or is hidden from the caller, 409 "idle"
// when the session has no live kernel now.
func (s *Server) sessionKernel(w http.ResponseWriter, r *http.Request, id string) (string, bool) {
	if s.hideSession(w, r, id) {
		return "", false
	}
	kid, err := s.pool.SessionKernel(id)
	if err != nil {
		s.writePoolError(w, err)
		return "", false
	}
	return kid, true
}

// hideSession answers 404, as for a session that does not exist, when
// there is none or the request may not act for its owner.
func (s *Server) hideSession(w http.ResponseWriter, r *http.Request, id string) bool {
	if owner, ok := s.pool.SessionOwner(id); ok && principalOf(r).Allows(owner) {
		return false
	}
	writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("session %q: %v", id, pool.ErrSessionNotFound))
	return true
}
