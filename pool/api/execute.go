package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/kernpool/kernpool/pool"
)

// errNeedStream is what a cell's tool call gets on a non-streaming request.
var errNeedStream = errors.New("tool calls need a streaming execute request")

func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request) {
	if s.refuseRoutedCell(w, r) || s.refuseCell(w) {
		return
	}
	var req ExecuteRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, s.cfg.BodyReadTimeout, &req); err != nil {
		writeBodyError(w, err)
		return
	}
	if req.Session != "" {
		// The session's owner is the request's: a credential that may
		// not act for it finds no session.
		if s.hideSession(w, r, req.Session) {
			return
		}
	} else if forbidOwner(w, r, req.Owner) || s.fenceOwner(w, r, req.Owner) {
		return
	}
	preq := req.Request
	preq.Timeout = time.Duration(req.Timeout)
	if err := s.checkAccess(preq); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	var st *stream
	if req.Stream {
		st = &stream{w: w, rc: http.NewResponseController(w), srv: s, done: make(chan struct{}), principal: principalOf(r)}
		preq.ToolHandler = pool.ToolHandlerFunc(st.handleTool)
		preq.Stream = st.output
	} else {
		preq.ToolHandler = pool.ToolHandlerFunc(func(context.Context, pool.ToolCall) (string, error) {
			return "", errNeedStream
		})
	}
	res, err := s.pool.Execute(r.Context(), preq)
	err = s.closedRoutedCell(r, req, err)
	if r.Context().Err() != nil {
		s.log.Warn("client disconnected; its cell was interrupted",
			"owner", preq.Owner, "kernel", kernelID(res), "error", err)
	}
	if st != nil {
		st.finish(res, err)
		return
	}
	if err != nil {
		s.writePoolError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// checkAccess applies ServerConfig.CheckAccess to a request that names
// its own interpreter or cwd. Relative paths are left to the pool, whose
// error says so.
func (s *Server) checkAccess(req pool.Request) error {
	if s.cfg.CheckAccess == nil || (req.Interpreter == "" && req.Cwd == "") {
		return nil
	}
	if relative(req.Interpreter) || relative(req.Cwd) {
		return nil
	}
	if err := s.cfg.CheckAccess(req.Interpreter, req.Cwd); err != nil {
		return fmt.Errorf("%w: %v", pool.ErrBadRequest, err)
	}
	return nil
}

func relative(path string) bool { return path != "" && !filepath.IsAbs(path) }

func kernelID(res *pool.Result) string {
	if res == nil {
		return ""
	}
	return res.Kernel.ID
}

// stream is one streaming execute response. The status line is sent
// lazily with the first event, so an error before any tool call still
// gets its proper HTTP status; after that, errors are error events.
type stream struct {
	srv *Server
	// principal made the request: only it (or an admin) may answer the
	// cell's tool calls.
	principal *Principal
	w         http.ResponseWriter
	rc        *http.ResponseController
	done      chan struct{} // closed when the cell settled: pending calls give up

	mu      sync.Mutex
	started bool // status line and headers sent
	closed  bool // final event sent; the handler returned or is returning
	broken  bool // a write failed: the client is gone or stalled
}

// send writes one event and flushes it. It reports false once the stream
// is closed or the client is gone.
// streamWriteTimeout bounds one event's write: a client that stops
// reading must not stall the kernel's output readers.
const streamWriteTimeout = 30 * time.Second

func (st *stream) send(ev Event) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed || st.broken {
		return false
	}
	st.start()
	_ = st.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if err := json.NewEncoder(st.w).Encode(ev); err != nil {
		st.broken = true
		return false
	}
	if st.rc.Flush() != nil {
		st.broken = true
		return false
	}
	return true
}

// output sends one live output or display event of the cell.
func (st *stream) output(e pool.Event) {
	st.send(Event{Event: EventName(e.Kind), Text: e.Text, Display: e.Display})
}

func (st *stream) start() {
	if st.started {
		return
	}
	st.started = true
	h := st.w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("X-Content-Type-Options", "nosniff")
	st.w.WriteHeader(http.StatusOK)
}

// finish sends the result (or error) and closes the stream.
func (st *stream) finish(res *pool.Result, err error) {
	close(st.done)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	if err != nil && !st.started {
		st.srv.writePoolError(st.w, err)
		return
	}
	st.start()
	_ = st.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	ev := Event{Event: EventResult, Result: res}
	if err != nil {
		_, code := st.srv.classify(err)
		ev = Event{Event: EventError, Error: err.Error(), Code: code}
	}
	_ = json.NewEncoder(st.w).Encode(ev) // the client may be gone; nothing to do
	_ = st.rc.Flush()
	_ = st.rc.SetWriteDeadline(time.Time{}) // the connection may serve more requests
}

// handleTool forwards one tool call to the client and waits for its
// answer, the tool-call timeout, the cell's end or the client's departure.
func (st *stream) handleTool(ctx context.Context, call pool.ToolCall) (string, error) {
	b := st.srv.broker
	id, answer := b.add(call.ID, st.principal)
	defer b.remove(id)
	call.ID = id
	if !st.send(Event{Event: EventToolCall, Call: &call}) {
		return "", fmt.Errorf("tool call %s: the client is gone", call.Tool)
	}
	timeout := st.srv.cfg.ToolCallTimeout
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case a := <-answer:
		if a.Error != nil {
			return "", errors.New(*a.Error)
		}
		return *a.Result, nil
	case <-timer.C:
		st.srv.log.Warn("tool call timed out", "id", id, "tool", call.Tool, "timeout", timeout.String())
		//lint:ignore ST1005 the cell reads this as the tool's answer, in the capitalized style of the other refusals it gets (rpcsock/protocol.go)
		return "", fmt.Errorf("Tool call %s timed out after %ss", call.Tool,
			strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64))
	case <-ctx.Done():
		return "", fmt.Errorf("tool call %s: %w", call.Tool, ctx.Err())
	case <-st.done:
		return "", fmt.Errorf("tool call %s: the cell has ended", call.Tool)
	}
}

func (s *Server) handleToolAnswer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var a ToolAnswer
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, s.cfg.BodyReadTimeout, &a); err != nil {
		writeBodyError(w, err)
		return
	}
	if (a.Result == nil) == (a.Error == nil) {
		writeError(w, http.StatusBadRequest, CodeBadRequest, `exactly one of "result" and "error" must be set`)
		return
	}
	if !s.broker.answer(id, a, principalOf(r)) {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no pending tool call %q (unknown, already answered or timed out)", id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"answered": id})
}
