package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/kernpool/kernpool/pool"
)

// maxResponseBytes bounds one decoded response or event line (a result
// carries at most the output caps, far below this).
const maxResponseBytes = 256 << 20

// The client's connections: dial timeout, idle connections kept, and how
// long one may stay idle (below the daemon's own idle timeout).
const (
	dialTimeout     = 5 * time.Second
	maxIdleConns    = 16
	idleConnTimeout = 90 * time.Second
)

// Client is a typed client of the API on a Unix socket. Safe for
// concurrent use; it keeps idle connections for reuse (CloseIdleConnections
// releases them).
type Client struct {
	// socket is the socket path, or the scheme and host of a network URL
	// (what errors name).
	socket string
	// base prefixes each request's path: "http://kernpool" on the socket.
	base string
	// token is sent as a bearer token (network clients).
	token string
	// rt carries the requests: the connection keeper on Unix systems
	// (keeper_unix.go), http.Transport elsewhere. It is used without an
	// http.Client, whose per-request work (a copy of the headers for
	// redirects, which the daemon never sends) is of no use here.
	rt transport
}

// transport is an http.RoundTripper that keeps idle connections.
type transport interface {
	http.RoundTripper
	CloseIdleConnections()
}

// NewClient returns a client of the daemon listening on socketPath.
func NewClient(socketPath string) *Client {
	return &Client{socket: socketPath, base: "http://kernpool", rt: newTransport(socketPath)}
}

// Socket returns the socket path the client dials (a network client:
// its URL's scheme and host).
func (c *Client) Socket() string { return c.socket }

// CloseIdleConnections closes kept-alive connections. Idempotent.
func (c *Client) CloseIdleConnections() { c.rt.CloseIdleConnections() }

// Execute runs one cell without streaming: a tool call of the cell is
// refused. A cell failure is a Result, not an error; errors are bad
// requests (*APIError wrapping pool.ErrBadRequest), capacity or shutdown
// refusals, and ErrUnavailable when no daemon answers. Canceling ctx
// disconnects, which makes the daemon kill the kernel.
func (c *Client) Execute(ctx context.Context, req pool.Request) (*pool.Result, error) {
	body := executeBody(req, false)
	var res pool.Result
	if err := c.do(ctx, http.MethodPost, "/v1/execute", body, &res); err != nil {
		return nil, opError("execute", err)
	}
	return &res, nil
}

// ExecuteStream runs one cell with streaming: each tool call of the cell
// is passed to h (concurrently if the cell makes concurrent calls) and
// its answer posted back. A nil h answers every call with an error.
func (c *Client) ExecuteStream(ctx context.Context, req pool.Request, h pool.ToolHandler) (*pool.Result, error) {
	return c.ExecuteLive(ctx, req, h, nil)
}

// ExecuteLive is ExecuteStream that also hands each live output and
// display event (stdout, stderr, display) to on, in order, as the cell
// runs. A nil on drops them.
func (c *Client) ExecuteLive(ctx context.Context, req pool.Request, h pool.ToolHandler, on func(Event)) (*pool.Result, error) {
	resp, err := c.send(ctx, http.MethodPost, "/v1/execute", executeBody(req, true))
	if err != nil {
		return nil, opError("execute", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("execute: %w", readError(resp))
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		var res pool.Result
		if err := decodeResponse(resp, &res); err != nil {
			return nil, opError("execute", err)
		}
		return &res, nil
	}
	res, err := c.readStream(ctx, resp.Body, h, on)
	if err != nil {
		return nil, opError("execute", err)
	}
	return res, nil
}

// readStream consumes the NDJSON events until the result or error event.
func (c *Client) readStream(ctx context.Context, body io.Reader, h pool.ToolHandler, on func(Event)) (*pool.Result, error) {
	hctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel() // handlers of calls the cell no longer waits for stop
		wg.Wait()
	}()
	dec := jsontext.NewDecoder(io.LimitReader(body, maxResponseBytes))
	for {
		var ev Event
		if err := jsonv2.UnmarshalDecode(dec, &ev); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%w: reading the event stream: %v", ErrProtocol, err)
		}
		switch ev.Event {
		case EventToolCall:
			if ev.Call == nil {
				return nil, fmt.Errorf("%w: tool_call event without a call", ErrProtocol)
			}
			call := *ev.Call
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.answerCall(hctx, h, call)
			}()
		case EventResult:
			if ev.Result == nil {
				return nil, fmt.Errorf("%w: result event without a result", ErrProtocol)
			}
			return ev.Result, nil
		case EventError:
			return nil, &APIError{Code: ev.Code, Message: ev.Error}
		case EventStdout, EventStderr, EventDisplay:
			if on != nil {
				on(ev)
			}
		default:
			// A newer daemon's event: skipped, so old clients keep working.
		}
	}
}

// answerCall runs the handler for one call and posts its answer. A failed
// post needs no retry: the daemon times the call out on its own.
func (c *Client) answerCall(ctx context.Context, h pool.ToolHandler, call pool.ToolCall) {
	var a ToolAnswer
	if h == nil {
		msg := "this client has no tool handler"
		a.Error = &msg
	} else if out, err := h.HandleTool(ctx, call); err != nil {
		msg := err.Error()
		a.Error = &msg
	} else {
		a.Result = &out
	}
	if ctx.Err() != nil {
		return
	}
	_ = c.AnswerToolCall(ctx, call.ID, a)
}

// Interrupt interrupts the cell running on kernel id (409 "idle" when
// none runs).
func (c *Client) Interrupt(ctx context.Context, id string) error {
	if err := c.do(ctx, http.MethodPost, "/v1/kernels/"+url.PathEscape(id)+"/interrupt", nil, nil); err != nil {
		return opError("interrupt", err)
	}
	return nil
}

// InterruptOwner interrupts the running cells of owner's kernels (of mode
// when not empty) and returns the kernel ids interrupted.
func (c *Client) InterruptOwner(ctx context.Context, owner, mode string) ([]string, error) {
	path := "/v1/owners/" + url.PathEscape(owner) + "/interrupt"
	if mode != "" {
		path += "?mode=" + url.QueryEscape(mode)
	}
	var out InterruptResponse
	if err := c.do(ctx, http.MethodPost, path, nil, &out); err != nil {
		return nil, opError("interrupt", err)
	}
	return out.Interrupted, nil
}

// Variables lists the user-defined names of kernel id (409 "busy" while a
// cell runs).
func (c *Client) Variables(ctx context.Context, id string) (*pool.Variables, error) {
	var out pool.Variables
	if err := c.do(ctx, http.MethodGet, "/v1/kernels/"+url.PathEscape(id)+"/variables", nil, &out); err != nil {
		return nil, opError("variables", err)
	}
	return &out, nil
}

// AnswerToolCall posts the answer to a streamed tool call.
func (c *Client) AnswerToolCall(ctx context.Context, id string, a ToolAnswer) error {
	if err := c.do(ctx, http.MethodPost, "/v1/tool-calls/"+url.PathEscape(id), a, nil); err != nil {
		return opError("answer tool call", err)
	}
	return nil
}

// List returns the live kernels.
func (c *Client) List(ctx context.Context) ([]pool.KernelInfo, error) {
	out, err := c.Listing(ctx)
	if err != nil {
		return nil, err
	}
	return out.Kernels, nil
}

// Listing returns the live kernels and the stored checkpoints.
func (c *Client) Listing(ctx context.Context) (*KernelList, error) {
	var out KernelList
	if err := c.do(ctx, http.MethodGet, "/v1/kernels", nil, &out); err != nil {
		return nil, opError("list", err)
	}
	return &out, nil
}

// ShutdownOwner kills every kernel of owner and returns how many.
func (c *Client) ShutdownOwner(ctx context.Context, owner string) (int, error) {
	var out ShutdownResponse
	if err := c.do(ctx, http.MethodPost, "/v1/owners/"+url.PathEscape(owner)+"/shutdown", nil, &out); err != nil {
		return 0, opError("shutdown owner", err)
	}
	return out.Killed, nil
}

// Kill kills one kernel; errors.Is(err, pool.ErrNotFound) if there is none.
func (c *Client) Kill(ctx context.Context, id string) error {
	if err := c.do(ctx, http.MethodDelete, "/v1/kernels/"+url.PathEscape(id), nil, nil); err != nil {
		return opError("kill", err)
	}
	return nil
}

// Spill copies the spill file name of the live kernel id to w and returns
// the bytes copied; errors.Is(err, pool.ErrNotFound) when the kernel or
// the file does not exist.
func (c *Client) Spill(ctx context.Context, id, name string, w io.Writer) (int64, error) {
	return c.copyGet(ctx, "spill", "/v1/kernels/"+url.PathEscape(id)+"/spill/"+url.PathEscape(name), w)
}

// copyGet copies the body of a GET of path to w (op names the operation
// in errors) and returns the bytes copied.
func (c *Client) copyGet(ctx context.Context, op, path string, w io.Writer) (int64, error) {
	resp, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return 0, opError(op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %w", op, readError(resp))
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, opError(op, err)
	}
	return n, nil
}

// Health returns the daemon's health report.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	if err := c.do(ctx, http.MethodGet, "/v1/health", nil, &h); err != nil {
		return nil, opError("health", err)
	}
	return &h, nil
}

func executeBody(req pool.Request, stream bool) ExecuteRequest {
	return ExecuteRequest{Request: req, Timeout: Duration(req.Timeout), Stream: stream}
}

// do sends one request and decodes a 200 answer into out (nil: discard).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.send(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return readError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes))
		return nil
	}
	return decodeResponse(resp, out)
}

func (c *Client) send(ctx context.Context, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.roundTrip(ctx, req)
}

// roundTrip sends req, built for c, and words a failure to reach the daemon.
func (c *Client) roundTrip(ctx context.Context, req *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		// Worded as http.Client words it: `Post "http://kernpool/...": ...`.
		err = &url.Error{Op: req.Method[:1] + strings.ToLower(req.Method[1:]), URL: req.URL.String(), Err: err}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return nil, fmt.Errorf("%w on %s: %w", ErrUnavailable, c.socket, opErr.Err)
		}
		return nil, fmt.Errorf("%w on %s: %w", ErrUnavailable, c.socket, err)
	}
	return resp, nil
}

// decodeResponse decodes a JSON answer into out. The answer is read whole
// (a buffer that grows with the bytes that arrive, never to a length the
// answer claims) and unmarshaled, which spares a streaming decoder's
// buffers; reading to EOF also frees the connection for reuse.
func decodeResponse(resp *http.Response, out any) error {
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err == nil {
		err = unmarshal(buf, out)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return nil
}

// unmarshal decodes one answer of the daemon. The client decodes with
// encoding/json's successor (github.com/go-json-experiment/json, what
// Go's encoding/json/v2 ships as): a result decodes in a third of
// encoding/json's time, the largest share of the client's own cost per
// cell. Stricter where it matters: a duplicate
// member or invalid UTF-8 is an error, never a silent choice; unknown
// members are skipped, so a newer daemon's answers still decode.
func unmarshal(data []byte, out any) error { return jsonv2.Unmarshal(data, out) }

// readError turns a non-200 answer into an *APIError.
func readError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var body ErrorBody
	if err := unmarshal(raw, &body); err != nil || body.Error == "" {
		return &APIError{StatusCode: resp.StatusCode, Code: CodeInternal,
			Message: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(raw)))}
	}
	ae := &APIError{StatusCode: resp.StatusCode, Code: body.Code, Message: body.Error}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
		ae.RetryAfter = time.Duration(secs) * time.Second
	}
	return ae
}

// opError wraps err with the client's operation, unless err is the
// daemon's answer and its message already names that operation (the pool
// wraps its errors with it too): one "execute: ", never two.
func opError(op string, err error) error {
	var ae *APIError
	if errors.As(err, &ae) && strings.HasPrefix(ae.Message, op+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}
