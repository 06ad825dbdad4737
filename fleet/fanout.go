package fleet

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// handleByID serves the endpoints that name a kernel, a session or a
// tool call by id: ids are the node's own, so the request goes to each
// live node in turn and the first that knows the id answers (404 when
// none does). The client's token goes with it, so each node applies
// its scope.
func (r *Router) handleByID(w http.ResponseWriter, req *http.Request) {
	auth, ok := r.byIDAuth(w, req)
	if !ok {
		return
	}
	var body []byte
	if req.Method == http.MethodPost {
		if body, ok = r.readBody(w, req); !ok {
			return
		}
	}
	r.tryEach(w, req, auth, body)
}

// handleList merges GET /v1/kernels of every live node: their kernels,
// and the checkpoints of the shared store once (from the first node
// that answers). Each node filters for the client's token; the router
// filters again for its principal.
func (r *Router) handleList(w http.ResponseWriter, req *http.Request) {
	auth, ok := r.nodeAuth(w, req)
	if !ok {
		return
	}
	ns, err := r.liveNodes(req.Context(), false)
	if err != nil {
		r.registryError(w, "", err)
		return
	}
	lists := askAll[api.KernelList](r, req, ns, auth)
	p := api.PrincipalOf(req)
	out := api.KernelList{Kernels: []pool.KernelInfo{}, Checkpoints: []pool.CheckpointInfo{}}
	ckpts := false
	for _, kl := range lists {
		if kl == nil {
			continue
		}
		out.Kernels = append(out.Kernels, kl.Kernels...)
		if !ckpts {
			out.Checkpoints, ckpts = append(out.Checkpoints, kl.Checkpoints...), true
		}
	}
	out.Kernels = slices.DeleteFunc(out.Kernels, func(k pool.KernelInfo) bool { return !p.Allows(k.Owner) })
	out.Checkpoints = slices.DeleteFunc(out.Checkpoints, func(c pool.CheckpointInfo) bool { return !p.Allows(c.Owner) })
	writeJSON(w, http.StatusOK, out)
}

// RouterHealth is a router's GET /v1/health.
type RouterHealth struct {
	Status  api.HealthStatus `json:"status"`
	Version string           `json:"version"`
	State   api.NodeState    `json:"state"`
	// Nodes are the live nodes (admin credentials only).
	Nodes []Node `json:"nodes,omitempty"`
	// MaxKernels and FreeKernels sum the live nodes' (admin only).
	MaxKernels  int `json:"max_kernels,omitempty"`
	FreeKernels int `json:"free_kernels,omitempty"`
}

// state is ready when the registry answers and a live node takes cells.
func (r *Router) state(req *http.Request) (api.NodeState, []Node) {
	ns, err := r.liveNodes(req.Context(), false)
	if err != nil || !slices.ContainsFunc(ns, func(n Node) bool { return !n.Draining }) {
		return api.StateNotReady, ns
	}
	return api.StateReady, ns
}

func (r *Router) handleReady(w http.ResponseWriter, req *http.Request) {
	st, _ := r.state(req)
	if st != api.StateReady {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, api.ReadyResponse{State: st, Code: api.CodeNoNode,
			Error: "the router reaches no fleet registry or no live node that is not draining"})
		return
	}
	writeJSON(w, http.StatusOK, api.ReadyResponse{State: st})
}

func (r *Router) handleHealth(w http.ResponseWriter, req *http.Request) {
	st, ns := r.state(req)
	h := RouterHealth{Status: api.HealthOK, Version: r.cfg.Version, State: st}
	if p := api.PrincipalOf(req); p != nil && p.Admin {
		h.Nodes = ns
		for _, n := range ns {
			h.MaxKernels += n.Max
			h.FreeKernels += n.Free
		}
	}
	writeJSON(w, http.StatusOK, h)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		api.WriteError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// askAll sends req to every node at once and decodes each 200 answer
// (at most 64 MiB) as a T; a node that fails or answers otherwise leaves
// nil in its place.
func askAll[T any](r *Router, req *http.Request, ns []Node, auth string) []*T {
	out := make([]*T, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() {
			resp, _, err := r.send(req, n, auth, 0, nil)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			var v T
			if resp.StatusCode == http.StatusOK && json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&v) == nil {
				out[i] = &v
			}
		})
	}
	wg.Wait()
	return out
}
