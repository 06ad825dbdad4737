package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/kernpool/kernpool/pool"
)

// Defaults of ServerConfig's zero fields.
const (
	// DefaultMaxBodyBytes caps a request body (16 MiB).
	DefaultMaxBodyBytes = 16 << 20
	// DefaultToolCallTimeout bounds how long a streamed tool call waits.
	DefaultToolCallTimeout = 120 * time.Second
	// DefaultBodyReadTimeout bounds how long a request body may take to
	// arrive (headers are bounded by the http.Server's ReadHeaderTimeout).
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultVariablesTimeout bounds a variables listing (a repr runs
	// user code; past it the listing is interrupted and answered 504).
	DefaultVariablesTimeout = 10 * time.Second
	// retryAfterSeconds is the Retry-After hint of a capacity refusal.
	retryAfterSeconds = "1"
)

// ServerConfig configures the API handler. Zero fields take defaults.
type ServerConfig struct {
	// Version is reported by /v1/health.
	Version string
	// Isolation describes the daemon's confinement for /v1/health
	// ("cgroup-v1+uid", "process-group", ...); the wiring sets it.
	Isolation string
	// ToolCallTimeout bounds how long a streamed tool call waits for its
	// answer before the cell gets an error result (default 120s).
	ToolCallTimeout time.Duration
	// MaxBodyBytes caps request bodies (default 16 MiB); a larger one is
	// answered 413.
	MaxBodyBytes int64
	// BodyReadTimeout bounds the arrival of a request body (default 30s);
	// a slower one is answered 408 and its connection closed.
	BodyReadTimeout time.Duration
	// VariablesTimeout bounds a variables listing (default 10s): a repr
	// runs user code; past it the listing is interrupted and answered 504.
	VariablesTimeout time.Duration
	// Logger receives the API's logs (Named "api"); nil discards them.
	Logger hclog.Logger
	// CheckAccess, when set, vets a request's own interpreter or cwd
	// before the pool sees it (can a kernel's uid use them?); an error is
	// a 400 naming the path. It gets "" for a field the request left to
	// the daemon's default; requests that name neither skip it.
	CheckAccess func(interpreter, cwd string) error
	// Metrics, when set, serves GET /metrics (the daemon wires its
	// Prometheus handler; this package does not depend on it).
	Metrics http.Handler
	// OnDrain, when set, is called once by the first POST /v1/drain,
	// after BeginDrain: the daemon then closes the pool (saving its
	// persist kernels), calls EndDrain and exits. It must not block.
	// Unset, POST /v1/drain answers 501.
	OnDrain func()
	// MaxKernels is the pool's cap, reported by /v1/health for a router
	// weighing nodes by free capacity (0: not reported).
	MaxKernels int
	// Placement, when set, reads an owner's record in the fleet's
	// registry: its generation and whether it names this node. Every
	// request of an owner with a generation header is checked against
	// it, so neither a node that restarts (and so remembers no
	// generation) nor one the owner was moved off runs an owner placed
	// elsewhere. It is called on the request path: the fleet's
	// PlacementCache answers warm owners without a read.
	Placement func(ctx context.Context, owner string) (gen uint64, here bool, err error)
	// OwnerSaving, in a fleet, is told of a routed cell this node
	// refuses (draining or shutting down) while its pool still holds
	// state of the owner that the close will save: it marks the owner's
	// record so that routers wait for that save before they place the
	// owner elsewhere, and marks it saved once it is (docs/fleet.md,
	// "Drain in a fleet"). An error refuses the cell with 503 no_node,
	// which a router does not take as leave to move the owner.
	OwnerSaving func(ctx context.Context, owner string) error
	// OwnerSaved, in a fleet, is told of a routed cell refused while the
	// pool holds nothing unsaved of the owner: it marks the record
	// saved, ending the routers' wait on a mark left by an earlier
	// drain of this node that died before its save. Errors are logged.
	OwnerSaved func(ctx context.Context, owner string) error
	// Settings, when set, answers GET /v1/settings with the configuration
	// the daemon runs with now (404 without it).
	Settings func() *Settings
}

// Server is the API's http.Handler over one pool.
type Server struct {
	pool     *pool.Pool
	cfg      ServerConfig
	log      hclog.Logger
	mux      *http.ServeMux
	broker   *broker
	draining atomic.Bool // cells are refused (a drain or a shutdown)
	ds       drainState
}

// NewServer returns the API handler for p. The caller owns p (and closes it).
func NewServer(p *pool.Pool, cfg ServerConfig) *Server {
	cfg.ToolCallTimeout = cmp.Or(max(cfg.ToolCallTimeout, 0), DefaultToolCallTimeout)
	cfg.MaxBodyBytes = cmp.Or(max(cfg.MaxBodyBytes, 0), DefaultMaxBodyBytes)
	cfg.BodyReadTimeout = cmp.Or(max(cfg.BodyReadTimeout, 0), DefaultBodyReadTimeout)
	cfg.VariablesTimeout = cmp.Or(max(cfg.VariablesTimeout, 0), DefaultVariablesTimeout)
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	s := &Server{pool: p, cfg: cfg, log: cfg.Logger.Named("api"), broker: newBroker()}
	s.ds.state, s.ds.done = StateReady, make(chan struct{})
	s.mux = s.routes()
	return s
}

// route is one endpoint of the API: docs/openapi.json documents each
// (a test checks it against this table).
type route struct {
	method, path string
	h            http.HandlerFunc
}

// endpoints is the API's route table.
func (s *Server) endpoints() []route {
	rs := []route{
		{http.MethodPost, "/v1/execute", s.handleExecute},
		{http.MethodPost, "/v1/tool-calls/{id}", s.handleToolAnswer},
		{http.MethodGet, "/v1/kernels", s.handleList},
		{http.MethodDelete, "/v1/kernels/{id}", s.handleKill},
		{http.MethodPost, "/v1/kernels/{id}/interrupt", s.handleInterrupt},
		{http.MethodGet, "/v1/kernels/{id}/variables", s.handleVariables},
		{http.MethodPost, "/v1/owners/{owner}/interrupt", s.handleInterruptOwner},
		{http.MethodGet, "/v1/kernels/{id}/spill/{name}", s.handleSpill},
		{http.MethodPost, "/v1/owners/{owner}/shutdown", s.handleShutdownOwner},
		{http.MethodGet, "/v1/kernels/{id}/files", s.handleFileList},
		{http.MethodGet, "/v1/kernels/{id}/files/{path...}", s.handleFileGet},
		{http.MethodPut, "/v1/kernels/{id}/files/{path...}", s.handleFilePut},
		{http.MethodDelete, "/v1/kernels/{id}/files/{path...}", s.handleFileDelete},
		{http.MethodGet, "/v1/owners/{owner}/files", s.handleFileList},
		{http.MethodGet, "/v1/owners/{owner}/files/{path...}", s.handleFileGet},
		{http.MethodPut, "/v1/owners/{owner}/files/{path...}", s.handleFilePut},
		{http.MethodDelete, "/v1/owners/{owner}/files/{path...}", s.handleFileDelete},
		{http.MethodGet, "/v1/sessions/{session}/files", s.handleFileList},
		{http.MethodGet, "/v1/sessions/{session}/files/{path...}", s.handleFileGet},
		{http.MethodPut, "/v1/sessions/{session}/files/{path...}", s.handleFilePut},
		{http.MethodDelete, "/v1/sessions/{session}/files/{path...}", s.handleFileDelete},
		{http.MethodGet, "/v1/health", s.handleHealth},
		{http.MethodGet, "/v1/ready", s.handleReady},
		{http.MethodPost, "/v1/drain", s.handleDrain},
		{http.MethodGet, "/v1/drain", s.handleDrainStatus},
		{http.MethodGet, "/v1/settings", s.handleSettings},
	}
	rs = append(rs, s.sessionRoutes()...)
	if m := s.cfg.Metrics; m != nil {
		rs = append(rs, route{http.MethodGet, "/metrics", func(w http.ResponseWriter, r *http.Request) {
			if !forbidNonAdmin(w, r) {
				m.ServeHTTP(w, r)
			}
		}})
	}
	return rs
}

// routes registers every endpoint, plus method-less twins that answer 405
// and a catch-all 404, so that every error is JSON.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	allowed := map[string][]string{}
	var paths []string
	for _, e := range s.endpoints() {
		mux.HandleFunc(e.method+" "+e.path, e.h)
		if allowed[e.path] == nil {
			paths = append(paths, e.path)
		}
		allowed[e.path] = append(allowed[e.path], e.method)
		if e.method == http.MethodGet {
			allowed[e.path] = append(allowed[e.path], http.MethodHead)
		}
	}
	for _, path := range paths {
		allow := strings.Join(allowed[path], ", ")
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed,
				fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// ServeHTTP logs each request at debug level and dispatches it. Below
// debug level it only dispatches: the log line's arguments cost
// allocations on every request even when the logger drops them.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.dispatch(w, r.WithContext(withPrincipal(r.Context(), localAdmin)))
}

// dispatch serves a request whose principal is set.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) {
	if !s.log.IsDebug() {
		s.mux.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	s.mux.ServeHTTP(rec, r)
	s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start).String())
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	kernels, ckpts := s.pool.List(), s.pool.Checkpoints()
	if p := principalOf(r); p == nil || !p.Admin {
		// Only its own owners' kernels and checkpoints; spares have none.
		kernels = slices.DeleteFunc(kernels, func(k pool.KernelInfo) bool { return k.Owner == "" || !p.Allows(k.Owner) })
		ckpts = slices.DeleteFunc(ckpts, func(c pool.CheckpointInfo) bool { return !p.Allows(c.Owner) })
	}
	if kernels == nil {
		kernels = []pool.KernelInfo{}
	}
	if ckpts == nil {
		ckpts = []pool.CheckpointInfo{}
	}
	writeJSON(w, http.StatusOK, KernelList{Kernels: kernels, Checkpoints: ckpts})
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.hideKernel(w, r, id) {
		return
	}
	if err := s.pool.Kill(id); err != nil {
		s.writePoolError(w, err)
		return
	}
	s.log.Info("kernel killed by API", "id", id)
	writeJSON(w, http.StatusOK, KillResponse{Killed: id})
}

func (s *Server) handleShutdownOwner(w http.ResponseWriter, r *http.Request) {
	owner := r.PathValue("owner")
	if owner == "" {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "owner must not be empty")
		return
	}
	if forbidOwner(w, r, owner) || s.fenceOwner(w, r, owner) {
		return
	}
	n := s.pool.ShutdownOwner(owner)
	s.log.Info("owner shut down by API", "owner", owner, "killed", n)
	writeJSON(w, http.StatusOK, ShutdownResponse{Owner: owner, Killed: n})
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if !isAdmin(r) {
		// The node's figures span every owner: a scoped credential gets
		// its state and version only.
		writeJSON(w, http.StatusOK, Health{Status: s.healthStatus(), Version: s.cfg.Version, Isolation: s.cfg.Isolation, State: s.State()})
		return
	}
	st := s.pool.Stats()
	h := Health{
		Version:          s.cfg.Version,
		Kernels:          st.KernelsLive,
		Isolation:        s.cfg.Isolation,
		Goroutines:       runtime.NumGoroutine(),
		PendingToolCalls: s.broker.len(),
		Stats:            st,
	}
	h.Status, h.State = s.healthStatus(), s.State()
	if s.drainMode() {
		ds := s.DrainStatus()
		h.Drain = &ds
	}
	if s.cfg.MaxKernels > 0 {
		h.MaxKernels = s.cfg.MaxKernels
		h.FreeKernels = max(0, s.cfg.MaxKernels-st.KernelsLive)
	}
	writeJSON(w, http.StatusOK, h)
}

func (s *Server) healthStatus() HealthStatus {
	if s.draining.Load() {
		return HealthDraining
	}
	return HealthOK
}

// writePoolError maps the pool's sentinels to HTTP statuses.
func (s *Server) writePoolError(w http.ResponseWriter, err error) {
	status, code := s.classify(err)
	if code == CodeDraining || code == CodeNoNode {
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	if status == http.StatusServiceUnavailable && code == CodeCapacity {
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	var qe *pool.QuotaError
	if errors.As(err, &qe) {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(qe.RetryAfter/time.Second), 10))
	}
	if status >= 500 && code != CodeCapacity && code != CodeClosed && code != CodeDraining && code != CodeNoNode && code != CodeTimedOut {
		s.log.Error("request failed", "error", err)
	}
	writeError(w, status, code, err.Error())
}

// classify is the package's classify, with a pool closed by a drain
// reported as draining (a cell that raced the drain's start).
func (s *Server) classify(err error) (int, string) {
	status, code := classify(err)
	if code == CodeClosed && s.drainMode() {
		code = CodeDraining
	}
	return status, code
}

func classify(err error) (int, string) {
	switch {
	case errors.Is(err, pool.ErrBadRequest), errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest, CodeBadRequest
	case errors.Is(err, pool.ErrNotFound), errors.Is(err, pool.ErrNoFile):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, pool.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, CodeTooLarge
	case errors.Is(err, pool.ErrNoSpace):
		return http.StatusInsufficientStorage, CodeNoSpace
	case errors.Is(err, pool.ErrNotRegular):
		return http.StatusConflict, CodeNotRegular
	case errors.Is(err, pool.ErrFileAccess):
		return http.StatusForbidden, CodeForbidden
	case errors.Is(err, pool.ErrCapacity):
		return http.StatusServiceUnavailable, CodeCapacity
	case errors.Is(err, pool.ErrQuota):
		return http.StatusTooManyRequests, CodeQuota
	case errors.Is(err, pool.ErrClosed):
		return http.StatusServiceUnavailable, CodeClosed
	case errors.Is(err, errUnmarked):
		return http.StatusServiceUnavailable, CodeNoNode
	case errors.Is(err, pool.ErrSessionMismatch):
		return http.StatusConflict, CodeSessionMismatch
	case errors.Is(err, pool.ErrConflict):
		return http.StatusConflict, CodeConflict
	case errors.Is(err, pool.ErrIdle):
		return http.StatusConflict, CodeIdle
	case errors.Is(err, pool.ErrBusy):
		return http.StatusConflict, CodeBusy
	case errors.Is(err, pool.ErrInterrupted):
		return http.StatusConflict, CodeInterrupted
	case errors.Is(err, pool.ErrKernelDied):
		return http.StatusConflict, CodeKernelDied
	case errors.Is(err, pool.ErrSpawn):
		return http.StatusInternalServerError, CodeSpawnFailed
	case errors.Is(err, pool.ErrTimeout):
		return http.StatusGatewayTimeout, CodeTimedOut
	}
	return http.StatusInternalServerError, CodeInternal
}

// writeJSON answers status with v encoded as JSON and a newline. The body
// is encoded first (encoding/json builds the whole value in memory either
// way) so that the answer carries a Content-Length and a value that
// cannot be encoded is a 500 rather than a cut-off body. It encodes into
// a pooled buffer (Encoder.Encode writes what Marshal does, newline
// included). The Date header stays: HTTP asks a server with a clock to
// send it, and dropping it gained nothing measurable.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := jsonBufs.Get().(*bytes.Buffer)
	defer putJSONBuf(buf)
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		_ = json.NewEncoder(buf).Encode(ErrorBody{Error: "encode response: " + err.Error(), Code: CodeInternal})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	// The status line is out; a failed write means the client went away.
	// Write returns before buf goes back to the pool: net/http copies or
	// sends the bytes and keeps no reference to them.
	_, _ = w.Write(buf.Bytes())
}

// jsonBufs holds writeJSON's buffers; one that grew past maxPooledJSON
// (a large result) is dropped rather than kept for every later answer.
var jsonBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledJSON = 64 << 10

func putJSONBuf(b *bytes.Buffer) {
	if b.Cap() > maxPooledJSON {
		return
	}
	b.Reset()
	jsonBufs.Put(b)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorBody{Error: msg, Code: code})
}

// writeBodyError answers a request whose body could not be decoded: 413
// when it was too large, 408 when it was too slow (the connection is then
// closed), else 400.
func writeBodyError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, err.Error())
	case errors.Is(err, errBodyTimeout):
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestTimeout, CodeTimeout, err.Error())
	default:
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
	}
}

// statusRecorder remembers the status for the request log. It forwards
// Flush through Unwrap (http.ResponseController finds it there).
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// WriteError answers with the API's JSON error body ({"error", "code"}),
// for a handler in front of the API (a fleet's router) that answers
// itself.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	writeError(w, status, code, msg)
}
