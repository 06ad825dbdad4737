package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/kernpool/kernpool/pool"
)

// NodeState is the node's state as GET /v1/ready, GET /v1/health and the
// drain endpoints report it.
type NodeState string

// Node states.
const (
	// StateReady: the node takes cells.
	StateReady NodeState = "ready"
	// StateDraining: a drain runs: cells are refused (code "draining"),
	// running ones finish within the grace, persist kernels are saved.
	StateDraining NodeState = "draining"
	// StateDrained: the drain is over; the daemon is exiting.
	StateDrained NodeState = "drained"
	// StateNotReady: the daemon shuts down without a drain (a stop
	// signal without drain_on_term); cells are refused (code "closed").
	StateNotReady NodeState = "not_ready"
)

// drainPoll is how often a waiting drain stream looks at the progress.
const drainPoll = 100 * time.Millisecond

// DrainStatus is the progress of a drain (POST and GET /v1/drain, and
// the "drain" member of /v1/health once one began).
type DrainStatus struct {
	// State is the node's state.
	State NodeState `json:"state"`
	// StartedAt is when the drain began (absent before).
	StartedAt *time.Time `json:"started_at,omitempty"`
	// CellsRunning counts kernels still running or queueing a cell.
	CellsRunning int `json:"cells_running"`
	// KernelsToSave is Saved + Failed + Remaining: the persist kernels
	// this drain saves.
	KernelsToSave int `json:"kernels_to_save"`
	// Saved counts persist kernels saved since the drain began.
	Saved int `json:"saved"`
	// Failed counts persist kernels whose save failed or was refused
	// (their state is lost; the daemon exits 1).
	Failed int `json:"failed"`
	// Remaining counts persist kernels still to be saved.
	Remaining int `json:"remaining"`
}

// drainState is the Server's node state (under mu).
type drainState struct {
	mu      sync.Mutex
	state   NodeState
	started time.Time
	base    pool.PoolStats // counters at the drain's start
	done    chan struct{}  // closed by EndDrain
	onDrain sync.Once
}

// SetDraining marks the daemon as shutting down without a drain: new
// cells are refused with 503 "closed" while list, kill, health and
// tool-call answers keep working; /v1/ready answers 503 "not_ready".
func (s *Server) SetDraining() {
	s.draining.Store(true)
	s.ds.mu.Lock()
	if s.ds.state == StateReady {
		s.ds.state = StateNotReady
	}
	s.ds.mu.Unlock()
}

// BeginDrain starts a drain (idempotent; false if one had begun): new
// cells are refused with 503 "draining" and Retry-After, /v1/ready
// answers 503, and the drain's progress is counted from now. The caller
// (the daemon) then closes the pool, which saves the persist kernels,
// and calls EndDrain.
func (s *Server) BeginDrain() bool {
	s.ds.mu.Lock()
	defer s.ds.mu.Unlock()
	if s.ds.state == StateDraining || s.ds.state == StateDrained {
		return false
	}
	s.ds.state, s.ds.started, s.ds.base = StateDraining, time.Now(), s.pool.Stats()
	s.draining.Store(true)
	return true
}

// EndDrain marks the drain over (after the pool closed) and returns its
// final status; a no-op returning the status when no drain began.
func (s *Server) EndDrain() DrainStatus {
	s.ds.mu.Lock()
	if s.ds.state == StateDraining {
		s.ds.state = StateDrained
		close(s.ds.done)
	}
	s.ds.mu.Unlock()
	return s.DrainStatus()
}

// State is the node's state.
func (s *Server) State() NodeState {
	s.ds.mu.Lock()
	defer s.ds.mu.Unlock()
	return s.ds.state
}

// DrainStatus reports the drain's progress (counts are zero before one).
func (s *Server) DrainStatus() DrainStatus {
	s.ds.mu.Lock()
	st := DrainStatus{State: s.ds.state}
	started, base := s.ds.started, s.ds.base
	s.ds.mu.Unlock()
	stats := s.pool.Stats()
	st.CellsRunning = stats.KernelsBusy
	if started.IsZero() {
		return st
	}
	st.StartedAt = &started
	st.Saved = int(stats.CheckpointsSaved - base.CheckpointsSaved)
	st.Failed = int(stats.CheckpointsFailed - base.CheckpointsFailed)
	st.Remaining = s.pool.PendingSaves()
	st.KernelsToSave = st.Saved + st.Failed + st.Remaining
	return st
}

// drainMode reports whether a drain (not a plain shutdown) runs or ran.
func (s *Server) drainMode() bool {
	st := s.State()
	return st == StateDraining || st == StateDrained
}

// refuseCell answers a cell the node does not take (draining or
// shutting down); false when it takes cells.
func (s *Server) refuseCell(w http.ResponseWriter) bool {
	if !s.draining.Load() {
		return false
	}
	if s.drainMode() {
		w.Header().Set("Retry-After", retryAfterSeconds)
		writeError(w, http.StatusServiceUnavailable, CodeDraining, "this kernpool node is draining and takes no cells; place the owner on another node")
		return true
	}
	writeError(w, http.StatusServiceUnavailable, CodeClosed, "kernpool is shutting down and takes no new cells")
	return true
}

// refuseRoutedCell refuses a cell a fleet's router sent (it carries the
// owner's generation) to a node that takes none, marking the owner's
// record first when the pool still holds the owner's unsaved state
// (ServerConfig.OwnerSaving): the router then waits for the save
// before it places the owner elsewhere, so the owner's next kernel
// restores the state this node is about to save rather than an older
// one. False when the node takes cells or the cell is not routed.
func (s *Server) refuseRoutedCell(w http.ResponseWriter, r *http.Request) bool {
	if !s.draining.Load() || s.cfg.OwnerSaving == nil || r.Header.Get(HeaderOwnerGeneration) == "" {
		return false
	}
	var req ExecuteRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, s.cfg.BodyReadTimeout, &req); err != nil {
		writeBodyError(w, err)
		return true
	}
	owner := cmp.Or(req.Owner, pool.DefaultOwner)
	if req.Session != "" {
		return s.refuseCell(w) // a session is the node's own: it does not move
	}
	if forbidOwner(w, r, owner) {
		return true
	}
	if err := s.markRefusedOwner(r.Context(), owner); err != nil {
		s.writePoolError(w, err) // 503 no_node with Retry-After (classify)
		return true
	}
	return s.refuseCell(w)
}

// errUnmarked: a draining node could not mark an owner's record saving;
// 503 no_node (retry later: the owner does not move meanwhile).
var errUnmarked = errors.New("this node is draining and could not record that it still saves owner")

// markRefusedOwner marks the record of owner, whose routed cell this
// draining node refuses: saving while the pool holds unsaved state of
// the owner (the router then waits for the save), else saved. An error
// (the saving mark failed) must refuse the cell without leave to move
// the owner.
func (s *Server) markRefusedOwner(ctx context.Context, owner string) error {
	if !s.pool.OwnerUnsaved(owner) {
		if s.cfg.OwnerSaved != nil {
			if err := s.cfg.OwnerSaved(ctx, owner); err != nil {
				s.log.Warn("owner's record not marked saved", "owner", owner, "error", err)
			}
		}
		return nil
	}
	if err := s.cfg.OwnerSaving(ctx, owner); err != nil {
		s.log.Error("owner's record not marked saving: its cell is refused without leave to move it", "owner", owner, "error", err)
		return fmt.Errorf("%w %s: %w", errUnmarked, owner, err)
	}
	return nil
}

// closedRoutedCell is for a routed cell the pool refused as closed (err)
// because a drain closed it while the cell waited behind the owner's
// running cell or raced the drain's start: its owner's record is marked
// as refuseRoutedCell marks it, since the state a drain saves holds the
// cells answered before; the error to answer with.
func (s *Server) closedRoutedCell(r *http.Request, req ExecuteRequest, err error) error {
	if !errors.Is(err, pool.ErrClosed) || !s.drainMode() || s.cfg.OwnerSaving == nil ||
		req.Session != "" || r.Header.Get(HeaderOwnerGeneration) == "" {
		return err
	}
	if merr := s.markRefusedOwner(r.Context(), cmp.Or(req.Owner, pool.DefaultOwner)); merr != nil {
		return merr
	}
	return err
}

// ReadyResponse is the body of GET /v1/ready: the state, and for a node
// that is not ready an error and code like every error body.
type ReadyResponse struct {
	State NodeState `json:"state"`
	Error string    `json:"error,omitempty"`
	Code  string    `json:"code,omitempty"`
}

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	st := s.State()
	switch st {
	case StateReady:
		writeJSON(w, http.StatusOK, ReadyResponse{State: st})
	case StateNotReady:
		writeJSON(w, http.StatusServiceUnavailable, ReadyResponse{State: st, Code: CodeClosed, Error: "kernpool is shutting down"})
	default:
		w.Header().Set("Retry-After", retryAfterSeconds)
		writeJSON(w, http.StatusServiceUnavailable, ReadyResponse{State: st, Code: CodeDraining, Error: "this kernpool node is draining"})
	}
}

func (s *Server) handleDrainStatus(w http.ResponseWriter, r *http.Request) {
	if forbidNonAdmin(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, s.DrainStatus())
}

// handleDrain starts a drain (POST /v1/drain): 202 with its status, or
// with ?wait=true an NDJSON stream of DrainStatus lines, one per change,
// ending with the "drained" one.
func (s *Server) handleDrain(w http.ResponseWriter, r *http.Request) {
	if forbidNonAdmin(w, r) {
		return
	}
	if s.cfg.OnDrain == nil {
		writeError(w, http.StatusNotImplemented, CodeNotSupported, "this program serves the API without a daemon that can drain")
		return
	}
	if s.BeginDrain() {
		s.log.Info("drain requested by API", "by", principalOf(r).Name)
	}
	s.ds.onDrain.Do(s.cfg.OnDrain)
	if r.URL.Query().Get("wait") != "true" {
		writeJSON(w, http.StatusAccepted, s.DrainStatus())
		return
	}
	s.streamDrain(w, r)
}

// streamDrain writes the drain's status on every change until it ends
// or the client leaves.
func (s *Server) streamDrain(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	var last DrainStatus
	for first := true; ; first = false {
		st := s.DrainStatus()
		if first || !sameProgress(st, last) {
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			if enc.Encode(st) != nil || rc.Flush() != nil {
				return
			}
			last = st
		}
		if st.State == StateDrained {
			return
		}
		select {
		case <-s.ds.done:
		case <-tick.C:
		case <-r.Context().Done():
			return
		}
	}
}

func sameProgress(a, b DrainStatus) bool {
	return a.State == b.State && a.CellsRunning == b.CellsRunning && a.Saved == b.Saved && a.Failed == b.Failed && a.Remaining == b.Remaining
}
