package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/kernpool/kernpool/pool"
)

// Explicit sessions (docs/api.md, "Sessions"). Execute a cell in one with
// Execute and pool.Request.Session.

// CreateSession creates a session; its kernel starts with its first cell.
func (c *Client) CreateSession(ctx context.Context, spec pool.SessionSpec) (*pool.SessionInfo, error) {
	var out pool.SessionInfo
	if err := c.do(ctx, http.MethodPost, "/v1/sessions", spec, &out); err != nil {
		return nil, opError("create session", err)
	}
	return &out, nil
}

// Sessions lists the sessions the client may see (of owner only, when
// not empty).
func (c *Client) Sessions(ctx context.Context, owner string) ([]pool.SessionInfo, error) {
	path := "/v1/sessions"
	if owner != "" {
		path += "?owner=" + url.QueryEscape(owner)
	}
	var out SessionList
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, opError("sessions", err)
	}
	return out.Sessions, nil
}

// Session describes one session; errors.Is(err, pool.ErrNotFound) when
// there is none (or it is another owner's).
func (c *Client) Session(ctx context.Context, id string) (*pool.SessionInfo, error) {
	var out pool.SessionInfo
	if err := c.do(ctx, http.MethodGet, sessionPath(id), nil, &out); err != nil {
		return nil, opError("session", err)
	}
	return &out, nil
}

// DeleteSession ends a session: its kernel is killed and its checkpoints
// deleted.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	if err := c.do(ctx, http.MethodDelete, sessionPath(id), nil, nil); err != nil {
		return opError("delete session", err)
	}
	return nil
}

// RestartSession kills the session's kernel (its state is lost) and keeps
// the session; it returns the killed kernel's id ("" if it had none).
func (c *Client) RestartSession(ctx context.Context, id string) (string, error) {
	var out SessionRestarted
	if err := c.do(ctx, http.MethodPost, sessionPath(id)+"/restart", nil, &out); err != nil {
		return "", opError("restart session", err)
	}
	return out.Killed, nil
}

// InterruptSession interrupts the cell running in the session (409
// "idle" when none runs or the session has no kernel).
func (c *Client) InterruptSession(ctx context.Context, id string) error {
	if err := c.do(ctx, http.MethodPost, sessionPath(id)+"/interrupt", nil, nil); err != nil {
		return opError("interrupt", err)
	}
	return nil
}

// SessionVariables lists the user-defined names of the session's kernel.
func (c *Client) SessionVariables(ctx context.Context, id string) (*pool.Variables, error) {
	var out pool.Variables
	if err := c.do(ctx, http.MethodGet, sessionPath(id)+"/variables", nil, &out); err != nil {
		return nil, opError("variables", err)
	}
	return &out, nil
}

func sessionPath(id string) string { return "/v1/sessions/" + url.PathEscape(id) }
