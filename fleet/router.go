package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// Defaults of RouterConfig's zero fields.
const (
	// DefaultNodesTTL is how long a router reuses its list of live nodes
	// before it reads the registry again (a dial error rereads at once).
	DefaultNodesTTL = 250 * time.Millisecond
	// staleNodesTTLs is, in NodesTTL, how old a node list may be and
	// still be served while it is reread in the background.
	staleNodesTTLs = 4
	// maxAttempts bounds how often one request is placed and resent
	// (a node gone, draining, or a fenced generation).
	maxAttempts = 4
)

// RouterConfig configures a Router. Zero fields take defaults.
type RouterConfig struct {
	// Registry holds the owner records and node heartbeats.
	Registry Registry
	// Transport carries requests to the nodes (TLS: their CA).
	Transport http.RoundTripper
	// NodeToken authenticates the router to the nodes for a client that
	// authenticated with a certificate (a bearer token is passed on as
	// is, so the nodes apply its scope too). Empty: such clients may
	// not go through.
	NodeToken string
	// MaxBodyBytes caps a request body (api.DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// BodyReadTimeout bounds a body's arrival (api.DefaultBodyReadTimeout).
	BodyReadTimeout time.Duration
	// NodesTTL is how long the live node list is reused (DefaultNodesTTL).
	NodesTTL time.Duration
	// SaveWait bounds how long a request waits for a draining node to
	// save its owner before it is answered 503 (DefaultSaveWait).
	SaveWait time.Duration
	// Version is reported by /v1/health.
	Version string
	// Logger receives the router's logs; nil discards them.
	Logger hclog.Logger
}

// Router is the fleet's stateless HTTP front (docs/fleet.md): the
// node API, each owner's requests forwarded to the node its record
// names. It expects api.Authenticate in front of it.
type Router struct {
	cfg RouterConfig
	log hclog.Logger
	mux *http.ServeMux

	owners ownerCache

	mu         sync.Mutex
	nodes      []Node
	nodesAt    time.Time
	refreshing bool // a background reread of the node list runs
}

// NewRouter returns the router's handler.
func NewRouter(cfg RouterConfig) *Router {
	cfg.MaxBodyBytes = cmp.Or(max(cfg.MaxBodyBytes, 0), api.DefaultMaxBodyBytes)
	cfg.BodyReadTimeout = cmp.Or(max(cfg.BodyReadTimeout, 0), api.DefaultBodyReadTimeout)
	cfg.NodesTTL = cmp.Or(max(cfg.NodesTTL, 0), DefaultNodesTTL)
	cfg.SaveWait = cmp.Or(max(cfg.SaveWait, 0), DefaultSaveWait)
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	r := &Router{cfg: cfg, log: cfg.Logger.Named("router")}
	r.mux = r.routes()
	return r
}

func (r *Router) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/execute", r.handleExecute)
	mux.HandleFunc("POST /v1/owners/{owner}/interrupt", r.handleOwner)
	mux.HandleFunc("POST /v1/owners/{owner}/shutdown", r.handleOwner)
	mux.HandleFunc("GET /v1/kernels", r.handleList)
	for _, p := range []string{"DELETE /v1/kernels/{id}", "POST /v1/kernels/{id}/interrupt", "GET /v1/kernels/{id}/variables",
		"GET /v1/kernels/{id}/spill/{name}", "POST /v1/tool-calls/{id}"} {
		mux.HandleFunc(p, r.handleByID)
	}
	mux.HandleFunc("GET /v1/ready", r.handleReady)
	mux.HandleFunc("GET /v1/health", r.handleHealth)
	for _, p := range []string{"/v1/drain", "/v1/settings", "/metrics"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, req *http.Request) {
			api.WriteError(w, http.StatusNotImplemented, api.CodeNotSupported,
				fmt.Sprintf("%s is a node's own endpoint: ask the node at its URL (kernpool drain --url)", req.URL.Path))
		})
	}
	r.routeSessionsAndFiles(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		api.WriteError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no such endpoint: %s %s", req.Method, req.URL.Path))
	})
	return mux
}

// ServeHTTP dispatches an authenticated request.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.mux.ServeHTTP(w, req) }

// liveNodes is the registry's node list. A list older than NodesTTL
// is still served while one request rereads it in the background (a
// warm request reads no Redis); one older than staleNodesTTLs times
// NodesTTL (the registry slow or failing), or fresh, is reread first.
func (r *Router) liveNodes(ctx context.Context, fresh bool) ([]Node, error) {
	r.mu.Lock()
	age := time.Since(r.nodesAt)
	if !fresh && r.nodes != nil && age < r.cfg.NodesTTL {
		ns := r.nodes
		r.mu.Unlock()
		return ns, nil
	}
	if !fresh && r.nodes != nil && age < staleNodesTTLs*r.cfg.NodesTTL {
		ns := r.nodes
		if !r.refreshing {
			r.refreshing = true
			go r.refreshNodes()
		}
		r.mu.Unlock()
		return ns, nil
	}
	r.mu.Unlock()
	return r.readNodes(ctx)
}

// refreshNodes rereads the node list for liveNodes, in the background.
func (r *Router) refreshNodes() {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.NodesTTL*staleNodesTTLs)
	defer cancel()
	if _, err := r.readNodes(ctx); err != nil {
		r.log.Warn("fleet registry: node list not reread", "error", err)
	}
	r.mu.Lock()
	r.refreshing = false
	r.mu.Unlock()
}

// readNodes reads the node list from the registry and keeps it.
func (r *Router) readNodes(ctx context.Context) ([]Node, error) {
	ns, err := r.cfg.Registry.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	if ns == nil {
		ns = []Node{}
	}
	r.mu.Lock()
	r.nodes, r.nodesAt = ns, time.Now()
	r.mu.Unlock()
	return ns, nil
}

func findNode(ns []Node, name string) (Node, bool) {
	i := slices.IndexFunc(ns, func(n Node) bool { return n.Name == name })
	if i < 0 {
		return Node{}, false
	}
	return ns[i], true
}

func (r *Router) handleExecute(w http.ResponseWriter, req *http.Request) {
	body, ok := r.readBody(w, req)
	if !ok {
		return
	}
	var head struct {
		Owner   string `json:"owner"`
		Session string `json:"session"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		api.WriteError(w, http.StatusBadRequest, api.CodeBadRequest, "request body: "+err.Error())
		return
	}
	if head.Session != "" {
		// The session's node runs it: ids are a node's own.
		if auth, ok := r.byIDAuth(w, req); ok {
			r.tryEach(w, req, auth, body)
		}
		return
	}
	r.serveOwner(w, req, head.Owner, body)
}

func (r *Router) handleOwner(w http.ResponseWriter, req *http.Request) {
	owner := req.PathValue("owner")
	if owner == "" {
		api.WriteError(w, http.StatusBadRequest, api.CodeBadRequest, "owner must not be empty")
		return
	}
	r.serveOwner(w, req, owner, nil)
}

// serveOwner forwards an owner's request to the node its record names,
// placing the owner first when it has no record or its node is gone
// or draining; it re-places and resends when the node refuses the
// connection, answers draining, or fences the generation.
func (r *Router) serveOwner(w http.ResponseWriter, req *http.Request, owner string, body []byte) {
	if owner == "" {
		owner = pool.DefaultOwner
	}
	if !api.PrincipalOf(req).Allows(owner) {
		api.WriteError(w, http.StatusForbidden, api.CodeForbidden, fmt.Sprintf("this credential may not act for owner %q", owner))
		return
	}
	auth, ok := r.nodeAuth(w, req)
	if !ok {
		return
	}
	ctx := req.Context()
	skip := map[string]bool{}
	for attempt := range maxAttempts {
		node, rec, err := r.ownerNode(ctx, owner, skip, attempt > 0)
		if err != nil {
			r.registryError(w, owner, err)
			return
		}
		res := r.forward(w, req, node, auth, rec.Generation, body)
		if res != sent {
			r.owners.drop(owner) // the next attempt reads the record
		}
		switch res {
		case sent:
			if req.URL.Path == "/v1/owners/"+owner+"/shutdown" {
				r.owners.drop(owner)
				// The owner's kernels and checkpoints are gone: so is its
				// record (a later placement takes a new generation).
				if err := r.cfg.Registry.Forget(context.WithoutCancel(ctx), owner, rec.Generation); err != nil {
					r.log.Warn("owner record not forgotten", "owner", owner, "error", err)
				}
			}
			return
		case nodeGone:
			r.log.Info("owner's node unavailable: placing it again", "owner", owner, "node", node.Name, "why", res, "generation", rec.Generation)
			skip[node.Name] = true
		case nodeDraining:
			skip[node.Name] = true
			if err := r.awaitSave(ctx, owner, node); err != nil {
				r.saveWaitError(w, owner, err)
				return
			}
			r.log.Info("owner's node drains: placing it again", "owner", owner, "node", node.Name, "generation", rec.Generation)
		case fenced:
			// Another router moved the owner: reread its record.
		}
	}
	w.Header().Set("Retry-After", "1")
	api.WriteError(w, http.StatusServiceUnavailable, api.CodeNoNode, fmt.Sprintf("owner %q: no node took the request after %d attempts", owner, maxAttempts))
}

// ownerNode is the node owner's record names, placing the owner when
// it has no record, or its node is not live, draining, or in skip. The
// first attempt (not fresh) takes the record from the router's cache
// when it names a live node that takes cells; the node fences it if it
// is stale (ownerCache).
func (r *Router) ownerNode(ctx context.Context, owner string, skip map[string]bool, fresh bool) (Node, Placement, error) {
	if rec, ok := r.owners.get(owner); ok && !fresh {
		ns, err := r.liveNodes(ctx, false)
		if err != nil {
			return Node{}, Placement{}, err
		}
		if n, live := findNode(ns, rec.Node); live && !skip[n.Name] {
			return n, rec, nil
		}
	}
	n, rec, err := r.readOwnerNode(ctx, owner, skip, fresh)
	if err == nil {
		r.owners.put(owner, rec)
	}
	return n, rec, err
}

// readOwnerNode is ownerNode from the record in the registry.
func (r *Router) readOwnerNode(ctx context.Context, owner string, skip map[string]bool, fresh bool) (Node, Placement, error) {
	rec, ok, err := r.cfg.Registry.Owner(ctx, owner)
	if err != nil {
		return Node{}, Placement{}, err
	}
	ns, err := r.liveNodes(ctx, fresh)
	if err != nil {
		return Node{}, Placement{}, err
	}
	for range maxAttempts {
		// A draining node is asked all the same: it answers draining
		// at once, after marking the record when it still has to save
		// the owner (awaitSave).
		if ok {
			if n, live := findNode(ns, rec.Node); live && !skip[n.Name] {
				return n, rec, nil
			}
		}
		choice, found := Place(owner, ns, skip)
		if !found {
			return Node{}, Placement{}, fmt.Errorf("place owner %q: %w", owner, ErrNoNode)
		}
		state := OwnerPlaced
		if ok {
			state = OwnerMoved
		}
		prev := rec.Generation
		if !ok {
			prev = 0
		}
		var wrote bool
		if rec, wrote, err = r.cfg.Registry.Place(ctx, owner, prev, choice.Name, state); err != nil {
			return Node{}, Placement{}, err
		}
		ok = rec.Node != ""
		if wrote {
			r.log.Info("owner placed", "owner", owner, "node", rec.Node, "generation", rec.Generation, "state", rec.State)
		}
		// Another router may have won with a node this one does not list
		// yet: the loop checks the record it got.
		if ok {
			if _, live := findNode(ns, rec.Node); !live {
				if ns, err = r.liveNodes(ctx, true); err != nil {
					return Node{}, Placement{}, err
				}
			}
		}
	}
	return Node{}, Placement{}, fmt.Errorf("place owner %q: the record kept changing: %w", owner, ErrNoNode)
}

// registryError answers a failed placement: no node (503, retry), or
// the registry failing (503 as well: the router cannot route).
func (r *Router) registryError(w http.ResponseWriter, owner string, err error) {
	w.Header().Set("Retry-After", "1")
	if errors.Is(err, ErrNoNode) {
		api.WriteError(w, http.StatusServiceUnavailable, api.CodeNoNode, err.Error())
		return
	}
	r.log.Error("fleet registry failed", "owner", owner, "error", err)
	api.WriteError(w, http.StatusServiceUnavailable, api.CodeNoNode, "the router cannot read the fleet registry: "+err.Error())
}
