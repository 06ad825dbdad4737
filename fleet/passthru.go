package fleet

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// Sessions and files through the router (docs/fleet.md, "Sessions and
// files"). A session id and a kernel's files are the node's own: a
// request naming a session or kernel id goes to the node that holds
// it; an owner's files go to the owner's node by its record. File
// bodies stream both ways through a fixed buffer: the router never
// holds a whole upload or download.

func (r *Router) routeSessionsAndFiles(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/sessions", r.handleCreateSession)
	mux.HandleFunc("GET /v1/sessions", r.handleListSessions)
	for _, p := range []string{"GET /v1/sessions/{id}", "DELETE /v1/sessions/{id}", "POST /v1/sessions/{id}/interrupt",
		"GET /v1/sessions/{id}/variables", "POST /v1/sessions/{id}/restart"} {
		mux.HandleFunc(p, r.handleByID)
	}
	for _, base := range []string{"/v1/sessions/{id}/files", "/v1/kernels/{id}/files"} {
		mux.HandleFunc("GET "+base, r.handleFilesByID)
		mux.HandleFunc("GET "+base+"/{path...}", r.handleFilesByID)
		mux.HandleFunc("PUT "+base+"/{path...}", r.handleFilesByID)
		mux.HandleFunc("DELETE "+base+"/{path...}", r.handleFilesByID)
	}
	mux.HandleFunc("GET /v1/owners/{owner}/files", r.handleOwnerFiles)
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		mux.HandleFunc(m+" /v1/owners/{owner}/files/{path...}", r.handleOwnerFiles)
	}
}

// handleCreateSession creates the session on its owner's node, placing
// the owner as a cell would.
func (r *Router) handleCreateSession(w http.ResponseWriter, req *http.Request) {
	body, ok := r.readBody(w, req)
	if !ok {
		return
	}
	var head struct {
		Owner string `json:"owner"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		api.WriteError(w, http.StatusBadRequest, api.CodeBadRequest, "request body: "+err.Error())
		return
	}
	r.serveOwner(w, req, head.Owner, body)
}

// handleListSessions merges GET /v1/sessions of every live node, each
// filtered by the client's token and again by the router.
func (r *Router) handleListSessions(w http.ResponseWriter, req *http.Request) {
	auth, ok := r.nodeAuth(w, req)
	if !ok {
		return
	}
	ns, err := r.liveNodes(req.Context(), false)
	if err != nil {
		r.registryError(w, "", err)
		return
	}
	lists := askAll[api.SessionList](r, req, ns, auth)
	p := api.PrincipalOf(req)
	out := api.SessionList{Sessions: []pool.SessionInfo{}}
	for _, l := range lists {
		if l != nil {
			out.Sessions = append(out.Sessions, l.Sessions...)
		}
	}
	out.Sessions = slices.DeleteFunc(out.Sessions, func(s pool.SessionInfo) bool { return !p.Allows(s.Owner) })
	slices.SortFunc(out.Sessions, func(a, b pool.SessionInfo) int {
		return cmp.Or(strings.Compare(a.Owner, b.Owner), strings.Compare(a.ID, b.ID))
	})
	writeJSON(w, http.StatusOK, out)
}

// handleFilesByID sends a files request naming a session or kernel to
// the node that holds it, found first with a light request (the
// session, or the kernel's working dir listing) that each node scopes
// by the client's token: an upload's body can be sent once only, and a
// node's own 404 (no such file) must reach the client as it is.
func (r *Router) handleFilesByID(w http.ResponseWriter, req *http.Request) {
	auth, ok := r.byIDAuth(w, req)
	if !ok {
		return
	}
	id := req.PathValue("id")
	probe := "/v1/kernels/" + url.PathEscape(id) + "/files?dir=."
	if strings.HasPrefix(req.URL.Path, "/v1/sessions/") {
		probe = "/v1/sessions/" + url.PathEscape(id)
	}
	n, found, err := r.locate(req, auth, probe)
	var failed *nodeFailedError
	switch {
	case errors.As(err, &failed):
		api.WriteError(w, http.StatusBadGateway, api.CodeNodeFailed, fmt.Sprintf("%s: %v", id, err))
	case err != nil:
		r.registryError(w, "", err)
	case !found:
		api.WriteError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("%s: %v on any node", id, pool.ErrNotFound))
	default:
		r.stream(w, req, n, auth, 0)
	}
}

// handleOwnerFiles sends an owner's files request to the node its
// record names (read from the registry: a stale copy would name a node
// that no longer holds the owner's kernel). Files calls never start a
// kernel, so an owner without a record, or whose node is gone, has no
// live kernel: 404 as from a node, and nothing is placed.
func (r *Router) handleOwnerFiles(w http.ResponseWriter, req *http.Request) {
	owner := req.PathValue("owner")
	if !api.PrincipalOf(req).Allows(owner) {
		api.WriteError(w, http.StatusForbidden, api.CodeForbidden, fmt.Sprintf("this credential may not act for owner %q", owner))
		return
	}
	auth, ok := r.nodeAuth(w, req)
	if !ok {
		return
	}
	rec, ok, err := r.cfg.Registry.Owner(req.Context(), owner)
	if err != nil {
		r.registryError(w, owner, err)
		return
	}
	var n Node
	if ok {
		var ns []Node
		if ns, err = r.liveNodes(req.Context(), false); err != nil {
			r.registryError(w, owner, err)
			return
		}
		n, ok = findNode(ns, rec.Node)
	}
	if !ok {
		api.WriteError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("owner %q has no live kernel (run a cell first): %v", owner, pool.ErrNotFound))
		return
	}
	r.stream(w, req, n, auth, rec.Generation)
}

// byIDAuth is handleByID's credential check: the client's bearer token,
// or for an admin certificate the router's node token.
func (r *Router) byIDAuth(w http.ResponseWriter, req *http.Request) (string, bool) {
	if auth := req.Header.Get("Authorization"); auth != "" {
		return auth, true
	}
	// The router's own node credential would act for owners the
	// client's certificate may not: the nodes could not scope it.
	if !api.PrincipalOf(req).Admin {
		api.WriteError(w, http.StatusForbidden, api.CodeForbidden,
			"kernel, session and tool-call endpoints through a router need a bearer token (or an admin certificate)")
		return "", false
	}
	return r.nodeAuth(w, req)
}

// nodeFailedError: no node knows an id, and a node that may hold it gave
// no answer (502 node_failed, not 404).
type nodeFailedError struct {
	node string
	err  error
}

func (e *nodeFailedError) Error() string {
	return fmt.Sprintf("node %s gave no answer (it may hold the id): %v", e.node, e.err)
}

// locate asks every live node for probe (GET) at once and returns the
// first that answers anything but 404; when none does and a node gave
// no answer, a *nodeFailedError.
func (r *Router) locate(req *http.Request, auth, probe string) (Node, bool, error) {
	ns, err := r.liveNodes(req.Context(), false)
	if err != nil {
		return Node{}, false, err
	}
	preq, err := http.NewRequestWithContext(req.Context(), http.MethodGet, probe, nil)
	if err != nil {
		return Node{}, false, err
	}
	preq.Header = req.Header.Clone()
	preq.Header.Del("Expect")
	found := make(chan Node, len(ns))
	failed := make(chan error, len(ns))
	var wg sync.WaitGroup
	for _, n := range ns {
		wg.Go(func() {
			resp, _, err := r.send(preq, n, auth, 0, nil)
			if err != nil {
				failed <- &nodeFailedError{node: n.Name, err: err}
				return
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxPeek))
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				found <- n
			}
		})
	}
	wg.Wait()
	close(found)
	close(failed)
	if n, ok := <-found; ok {
		return n, true, nil
	}
	if err := <-failed; err != nil && req.Context().Err() == nil {
		return Node{}, false, err
	}
	return Node{}, false, nil
}

// stream forwards req to node once, its body read as it is sent (each
// read bounded by BodyReadTimeout, as a node bounds it), and relays the
// answer. A node that fails meanwhile is 502 node_failed: an upload
// may have been partly written, so nothing is resent.
func (r *Router) stream(w http.ResponseWriter, req *http.Request, n Node, auth string, gen uint64) {
	var body io.Reader = http.NoBody
	if req.ContentLength != 0 {
		body = &idleBody{r: req.Body, rc: http.NewResponseController(w), idle: r.cfg.BodyReadTimeout}
		defer func() { _ = http.NewResponseController(w).SetReadDeadline(time.Time{}) }()
	}
	resp, _, err := r.sendBody(req, n, auth, gen, body, req.ContentLength)
	if err != nil {
		if req.Context().Err() != nil {
			return // the client went away
		}
		w.Header().Set("Connection", "close") // the rest of an upload is not read
		api.WriteError(w, http.StatusBadGateway, api.CodeNodeFailed, fmt.Sprintf("node %s: %v", n.Name, err))
		return
	}
	defer resp.Body.Close()
	relay(w, resp, n.Name)
}

// idleBody reads a client's body, failing a read that waits longer
// than idle (a stalled upload holds the router no longer).
type idleBody struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration
}

func (b *idleBody) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.idle))
	return b.r.Read(p)
}

// tryEach sends req (with body, already read) to each live node in turn
// and relays the first answer that is not 404; a node that refuses
// cells (503 draining or closed) may not be the one that holds the id,
// so its refusal is relayed only when no node knows the id. A node
// that gave no answer (it died mid-cell, or is unreachable) may have
// held the id: when no node knows it, that is 502 node_failed, not 404.
func (r *Router) tryEach(w http.ResponseWriter, req *http.Request, auth string, body []byte) {
	ns, err := r.liveNodes(req.Context(), false)
	if err != nil {
		r.registryError(w, "", err)
		return
	}
	var refusal *http.Response
	var failed error
	for _, n := range ns {
		resp, _, err := r.send(req, n, auth, 0, body)
		if err != nil {
			if req.Context().Err() != nil {
				return // the client went away
			}
			failed = fmt.Errorf("node %s gave no answer (it may hold %s): %w", n.Name, cmp.Or(req.PathValue("id"), "the session"), err)
			continue
		}
		if resp.StatusCode == http.StatusNotFound {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxPeek))
			resp.Body.Close()
			continue
		}
		if resp.StatusCode == http.StatusServiceUnavailable {
			code, peeked := peekCode(resp)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(peeked))
			if code == api.CodeDraining || code == api.CodeClosed {
				refusal = resp
				continue
			}
		}
		relay(w, resp, n.Name)
		resp.Body.Close()
		return
	}
	if failed != nil {
		api.WriteError(w, http.StatusBadGateway, api.CodeNodeFailed, failed.Error())
		return
	}
	if refusal != nil {
		relay(w, refusal, "")
		return
	}
	api.WriteError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("%s: %v on any node", cmp.Or(req.PathValue("id"), "the session"), pool.ErrNotFound))
}
