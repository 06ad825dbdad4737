package rpcsock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kernpool/kernpool/pool"
)

// cell is one cell's authority: who answers its calls and how many it may
// still make. made and the server's cur pointer are guarded by Server.mu.
type cell struct {
	h      pool.ToolHandler
	budget int
	made   int
	ctx    context.Context
	cancel context.CancelFunc
}

// BeginCell installs h as the authority for the calls that arrive from now
// on, with budget calls (<= 0 means DefaultBudget). The returned end func
// retires it: calls arriving afterwards are refused "No active cell", the
// context of calls still running is canceled, and end reports how many calls
// were dispatched to h. end is idempotent and always returns the same count.
// Beginning a cell while another is active retires the earlier one first
// (the pool serializes cells, so this only happens after a caller bug).
func (s *Server) BeginCell(h pool.ToolHandler, budget int) (end func() (callsMade int)) {
	budget = cmp.Or(max(budget, 0), DefaultBudget)
	base := s.baseCtx
	if base == nil {
		base = context.Background()
	}
	ctx, cancel := context.WithCancel(base)
	c := &cell{h: h, budget: budget, ctx: ctx, cancel: cancel}
	s.mu.Lock()
	prev := s.cur
	if s.closed {
		cancel()
	} else {
		s.cur = c
	}
	s.mu.Unlock()
	if prev != nil {
		s.log.Warn("cell begun while another was active; retiring the earlier one")
		s.retire(prev)
	}
	var once sync.Once
	var made int
	return func() int {
		once.Do(func() { made = s.retire(c) })
		return made
	}
}

// retire removes c's authority (if still installed), cancels its calls and
// returns its dispatched count.
func (s *Server) retire(c *cell) int {
	s.mu.Lock()
	if s.cur == c {
		s.cur = nil
	}
	n := c.made
	s.mu.Unlock()
	c.cancel()
	return n
}

// reserve takes one unit of the current cell's budget, or says why not.
// A refusal consumes nothing.
func (s *Server) reserve() (*cell, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cur
	switch {
	case c == nil:
		return nil, MsgNoActiveCell
	case c.h == nil:
		return nil, MsgNoHandler
	case c.made >= c.budget:
		return nil, LimitMessage(c.budget)
	}
	c.made++
	return c, ""
}

// handleLine runs one request line through the checks in the contract's
// order (JSON, token, field types, tool set, active cell, budget) and
// dispatches it; it returns the reply line.
func (s *Server) handleLine(line []byte) []byte {
	req, refusal := parseRequest(line, s.token)
	if refusal != "" {
		s.log.Debug("request refused", "reason", refusalKind(refusal))
		return errorReply(refusal)
	}
	if _, found := slices.BinarySearch(s.cfg.Tools, req.tool); !found {
		s.log.Debug("request refused", "reason", "unknown tool")
		return errorReply(UnknownToolMessage(req.tool, s.cfg.Tools))
	}
	c, refusal := s.reserve()
	if refusal != "" {
		s.log.Debug("request refused", "reason", refusal)
		return errorReply(refusal)
	}
	call := pool.ToolCall{ID: fmt.Sprintf("%s-%d", s.idPrefix, s.nextID.Add(1)), Tool: req.tool, Args: req.args}
	start := time.Now()
	result, err := s.dispatch(c, call)
	s.log.Debug("tool call answered", "id", call.ID, "tool", call.Tool, "failed", err != nil, "duration", time.Since(start).String())
	if err != nil {
		if c.ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return errorReply(MsgCellSettled)
		}
		return errorReply(err.Error())
	}
	return resultReply(result)
}

// dispatch calls the cell's handler with the cell's context; a panicking
// handler becomes an error instead of taking the daemon down.
func (s *Server) dispatch(c *cell, call pool.ToolCall) (result string, err error) {
	defer func() {
		if p := recover(); p != nil {
			// The panic value may hold call data: log only where it happened.
			s.log.Error("tool handler panicked", "id", call.ID, "tool", call.Tool)
			result, err = "", errHandlerPanic
		}
	}()
	return c.h.HandleTool(c.ctx, call)
}

// refusalKind names a refusal for logs without echoing request data.
func refusalKind(msg string) string {
	switch {
	case msg == MsgUnauthorized:
		return "unauthorized"
	case len(msg) >= len(MsgInvalidPrefix) && msg[:len(MsgInvalidPrefix)] == MsgInvalidPrefix:
		return "invalid"
	default:
		return "other"
	}
}
