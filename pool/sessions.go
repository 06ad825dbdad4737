package pool

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Explicit sessions: a named, owner-bound handle on one kernel key. The
// session id is part of the key (key.session), so a session's kernel is
// never an implicit request's, nor another session's, even with equal
// parameters. The session outlives its kernels: an eviction, the idle
// reaper or a crash ends the kernel, and the session's next cell starts a
// new one, which restores the last checkpoint when the mode persists.
// Only DeleteSession, the owner's shutdown, the session idle timeout and
// the pool's Close end a session. Sessions live in the daemon's memory: a
// restart forgets them (their env values are never written anywhere), so
// Close neither saves a session's kernel nor keeps its checkpoints.

// Session bounds (SessionConfig's defaults).
const (
	DefaultMaxSessions         = 1024
	DefaultMaxSessionsPerOwner = 64
	DefaultSessionIdleTimeout  = 24 * time.Hour
	DefaultMaxEnvNames         = 64
	DefaultMaxEnvBytes         = 32 << 10
)

// SessionConfig bounds explicit sessions and request environments.
type SessionConfig struct {
	// MaxSessions caps the sessions of the whole pool, MaxSessionsPerOwner
	// those of one owner; a create past either is refused (ErrQuota).
	MaxSessions, MaxSessionsPerOwner int
	// IdleTimeout ends a session whose kernel is gone and that no request
	// used for that long (its checkpoints go with it).
	IdleTimeout time.Duration
	// MaxEnvNames and MaxEnvBytes bound one env map (a session's or a
	// request's): its number of names, and the bytes of its names and
	// values together.
	MaxEnvNames, MaxEnvBytes int
}

func (c SessionConfig) withDefaults() (SessionConfig, error) {
	if c.MaxSessions < 0 || c.MaxSessionsPerOwner < 0 || c.IdleTimeout < 0 || c.MaxEnvNames < 0 || c.MaxEnvBytes < 0 {
		return c, fmt.Errorf("session and env bounds must not be negative: %w", ErrBadRequest)
	}
	c.MaxSessions = cmp.Or(c.MaxSessions, DefaultMaxSessions)
	c.MaxSessionsPerOwner = cmp.Or(c.MaxSessionsPerOwner, DefaultMaxSessionsPerOwner)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultSessionIdleTimeout)
	c.MaxEnvNames = cmp.Or(c.MaxEnvNames, DefaultMaxEnvNames)
	c.MaxEnvBytes = cmp.Or(c.MaxEnvBytes, DefaultMaxEnvBytes)
	return c, nil
}

// SessionSpec is what a session is created with (POST /v1/sessions).
type SessionSpec struct {
	Owner       string            `json:"owner,omitempty"`
	Mode        string            `json:"mode,omitempty"`
	Interpreter string            `json:"interpreter,omitempty"`
	Cwd         string            `json:"cwd,omitempty"`
	Tools       []string          `json:"tools,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
}

// SessionInfo describes one session. Its env's values are never shown.
type SessionInfo struct {
	ID          string    `json:"id"`
	Owner       string    `json:"owner"`
	Mode        string    `json:"mode"`
	Interpreter string    `json:"interpreter"`
	Cwd         string    `json:"cwd"`
	Tools       []string  `json:"tools"`
	EnvNames    []string  `json:"env_names"`
	CreatedAt   time.Time `json:"created_at"`
	LastUsed    time.Time `json:"last_used"`
	// KernelID is the session's live kernel; empty before its first cell
	// and after its kernel ended (its next cell starts one).
	KernelID string `json:"kernel_id,omitempty"`
}

// session is one registry entry (under Pool.mu).
type session struct {
	id       string
	key      key
	tools    []string
	env      map[string]string
	envNames []string
	created  time.Time
	lastUsed time.Time
}

// CreateSession validates spec like a request and registers a session.
// Its kernel starts with its first cell (a warm spare when one fits).
func (p *Pool) CreateSession(spec SessionSpec) (SessionInfo, error) {
	rq, err := p.normalize(Request{Owner: spec.Owner, Mode: spec.Mode, Interpreter: spec.Interpreter, Cwd: spec.Cwd, Tools: spec.Tools})
	if err != nil {
		return SessionInfo{}, fmt.Errorf("create session: %w", err)
	}
	names, err := p.checkEnv("env", rq.key.mode, spec.Env)
	if err != nil {
		return SessionInfo{}, fmt.Errorf("create session: %w", err)
	}
	now := time.Now()
	s := &session{id: newSessionID(), key: rq.key, tools: rq.tools, env: maps.Clone(spec.Env), envNames: names, created: now, lastUsed: now}
	s.key.session = s.id
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return SessionInfo{}, fmt.Errorf("create session: %w", ErrClosed)
	}
	if p.sessions == nil {
		p.sessions = make(map[string]*session)
	}
	lim := p.cfg.Sessions
	if len(p.sessions) >= lim.MaxSessions {
		return SessionInfo{}, fmt.Errorf("create session: the pool holds %d sessions, its limit: %w", len(p.sessions), ErrQuota)
	}
	if n := p.ownerSessionsLocked(s.key.owner); n >= lim.MaxSessionsPerOwner {
		return SessionInfo{}, fmt.Errorf("create session: owner %q holds %d sessions, the limit: %w", s.key.owner, n, ErrQuota)
	}
	p.sessions[s.id] = s
	return p.sessionInfoLocked(s), nil
}

// newSessionID returns "s" + 32 lowercase hex digits from crypto/rand:
// unguessable, and never a kernel id ("k...").
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead).
	return "s" + hex.EncodeToString(b[:])
}

func (p *Pool) ownerSessionsLocked(owner string) int {
	n := 0
	for _, s := range p.sessions {
		if s.key.owner == owner {
			n++
		}
	}
	return n
}

func (p *Pool) sessionInfoLocked(s *session) SessionInfo {
	info := SessionInfo{
		ID: s.id, Owner: s.key.owner, Mode: s.key.mode, Interpreter: s.key.interpreter, Cwd: s.key.cwd,
		Tools: slices.Clone(s.tools), EnvNames: slices.Clone(s.envNames), CreatedAt: s.created, LastUsed: s.lastUsed,
	}
	if info.Tools == nil {
		info.Tools = []string{}
	}
	if info.EnvNames == nil {
		info.EnvNames = []string{}
	}
	if sl := p.slots[s.key]; sl != nil && sl.live != nil {
		info.KernelID = sl.live.id
	}
	return info
}

// Sessions lists the sessions whose owner keep accepts (nil: all),
// sorted by owner then id.
func (p *Pool) Sessions(keep func(owner string) bool) []SessionInfo {
	p.mu.Lock()
	out := make([]SessionInfo, 0, len(p.sessions))
	for _, s := range p.sessions {
		if keep == nil || keep(s.key.owner) {
			out = append(out, p.sessionInfoLocked(s))
		}
	}
	p.mu.Unlock()
	slices.SortFunc(out, func(a, b SessionInfo) int {
		return cmp.Or(cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// Session describes session id; ErrSessionNotFound (also ErrNotFound)
// when there is none.
func (p *Pool) Session(id string) (SessionInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sessions[id]
	if s == nil {
		return SessionInfo{}, sessionNotFound("session", id)
	}
	return p.sessionInfoLocked(s), nil
}

// SessionOwner is the owner of session id (ok false: no such session).
// The API checks it against the caller's credential before anything else.
func (p *Pool) SessionOwner(id string) (owner string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.sessions[id]; s != nil {
		return s.key.owner, true
	}
	return "", false
}

// SessionKernel resolves session id to its live kernel's id, for the
// endpoints that act on a kernel (interrupt, variables, files).
// ErrSessionNotFound without the session; ErrIdle when it has no live
// kernel now (its next cell starts one).
func (p *Pool) SessionKernel(id string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sessions[id]
	if s == nil {
		return "", sessionNotFound("session", id)
	}
	if sl := p.slots[s.key]; sl != nil && sl.live != nil {
		return sl.live.id, nil
	}
	return "", fmt.Errorf("session %s has no live kernel (its next cell starts one): %w", id, ErrIdle)
}

// DeleteSession ends session id: its kernel is killed (a running cell
// ends as interrupted) and its checkpoints are deleted.
func (p *Pool) DeleteSession(id string) error {
	p.mu.Lock()
	s := p.sessions[id]
	if s == nil {
		p.mu.Unlock()
		return sessionNotFound("delete session", id)
	}
	delete(p.sessions, id)
	p.mu.Unlock()
	p.endSessionKernel(s.key)
	return nil
}

// RestartSession kills session id's kernel and deletes its checkpoints:
// the session stays, and its next cell starts on a fresh kernel
// (state_reset). It returns the id of the kernel it killed ("" if none).
func (p *Pool) RestartSession(id string) (string, error) {
	p.mu.Lock()
	s := p.sessions[id]
	if s == nil {
		p.mu.Unlock()
		return "", sessionNotFound("restart session", id)
	}
	p.mu.Unlock()
	return p.endSessionKernel(s.key), nil
}

// endSessionKernel kills k's kernel, if any, and drops k's checkpoints.
func (p *Pool) endSessionKernel(k key) string {
	gone := p.killWhere(reasonKilled, func(s *slot) bool { return s.key == k })
	p.mu.Lock()
	wait := p.saving[k]
	p.mu.Unlock()
	if wait != nil {
		<-wait
	}
	p.ckpt.remove(k, deleteAll)
	p.forgetMasksWhere(func(m key) bool { return m == k })
	if len(gone) > 0 {
		return gone[0].lv.id
	}
	return ""
}

// dropSessionCheckpoints deletes the checkpoints of every session (Close:
// the sessions end with the pool, so nothing could restore them; their
// kernels were not saved at close either).
func (p *Pool) dropSessionCheckpoints() {
	p.mu.Lock()
	keys := make([]key, 0, len(p.sessions))
	for _, s := range p.sessions {
		keys = append(keys, s.key)
	}
	p.mu.Unlock()
	for _, k := range keys {
		p.ckpt.remove(k, deleteAll)
	}
}

// dropOwnerSessionsLocked forgets owner's sessions (their kernels and
// checkpoints go with the owner's shutdown).
func (p *Pool) dropOwnerSessionsLocked(owner string) {
	for id, s := range p.sessions {
		if s.key.owner == owner {
			delete(p.sessions, id)
		}
	}
}

// expireSessionsLocked ends the sessions without a kernel that no request
// used for IdleTimeout; their checkpoint keys are returned for removal.
func (p *Pool) expireSessionsLocked(now time.Time) []key {
	var out []key
	for id, s := range p.sessions {
		if sl := p.slots[s.key]; sl != nil {
			continue // a kernel, or a caller waiting for one
		}
		if now.Sub(s.lastUsed) > p.cfg.Sessions.IdleTimeout {
			delete(p.sessions, id)
			out = append(out, s.key)
		}
	}
	return out
}

// liveSessionLocked reports whether k belongs to no session or to one
// that still exists (a deleted session's key starts no kernel), and
// marks the session used.
func (p *Pool) liveSessionLocked(k key, now time.Time) bool {
	if k.session == "" {
		return true
	}
	s := p.sessions[k.session]
	if s == nil {
		return false
	}
	s.lastUsed = now
	return true
}

// applySession fills req from its session and returns the session's env.
// A field req names must equal the session's: a tool set that differs is
// refused (ErrSessionMismatch), never served by another kernel.
func (p *Pool) applySession(req Request) (Request, map[string]string, error) {
	p.mu.Lock()
	s := p.sessions[req.Session]
	var sk key
	var tools []string
	var env map[string]string
	if s != nil {
		sk, tools, env = s.key, s.tools, s.env
	}
	p.mu.Unlock()
	if s == nil {
		return req, nil, sessionNotFound("session", req.Session)
	}
	if req.Owner != "" && req.Owner != sk.owner {
		// Another owner's session does not exist for this owner.
		return req, nil, sessionNotFound("session", req.Session)
	}
	mismatch := func(field, got, want string) error {
		return fmt.Errorf("session %s: the request's %s %s differs from the session's %s; a session's %s is fixed, create another session for it: %w",
			req.Session, field, got, want, field, ErrSessionMismatch)
	}
	if req.Mode != "" && req.Mode != sk.mode {
		return req, nil, mismatch("mode", fmt.Sprintf("%q", req.Mode), fmt.Sprintf("%q", sk.mode))
	}
	if req.Interpreter != "" && filepath.Clean(req.Interpreter) != sk.interpreter {
		return req, nil, mismatch("interpreter", req.Interpreter, sk.interpreter)
	}
	if req.Cwd != "" && filepath.Clean(req.Cwd) != sk.cwd {
		return req, nil, mismatch("cwd", req.Cwd, cmp.Or(sk.cwd, "(its staging dir)"))
	}
	if len(req.Tools) > 0 {
		got, err := checkTools(req.Tools)
		if err != nil {
			return req, nil, err
		}
		if !slices.Equal(got, tools) {
			return req, nil, mismatch("tool set", "["+strings.Join(got, ",")+"]", "["+strings.Join(tools, ",")+"]")
		}
	}
	req.Owner, req.Mode, req.Interpreter, req.Cwd, req.Tools = sk.owner, sk.mode, sk.interpreter, sk.cwd, tools
	return req, env, nil
}

// sessionNotFound is the error for a session id that names no session
// (of the caller's owner).
func sessionNotFound(op, id string) error {
	return fmt.Errorf("%s %q: %w", op, id, notFoundSession{})
}

// notFoundSession matches ErrSessionNotFound and ErrNotFound.
type notFoundSession struct{}

func (notFoundSession) Error() string { return ErrSessionNotFound.Error() }
func (notFoundSession) Is(target error) bool {
	return target == ErrSessionNotFound || target == ErrNotFound
}
