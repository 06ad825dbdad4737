package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kernpool/kernpool/pool/api"
)

// outcome is how one forwarded request ended.
type outcome string

const (
	sent         outcome = "sent"     // the node's answer went to the client
	nodeGone     outcome = "gone"     // the node refused the connection
	nodeDraining outcome = "draining" // the node answered 503 draining
	fenced       outcome = "fenced"   // the node has seen a newer generation
)

// maxPeek bounds the error body the router reads to decide on a retry.
const maxPeek = 64 << 10

// hopHeaders are not forwarded (RFC 9110 7.6.1), nor is a client's
// generation: only the router's record sets it.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade", api.HeaderOwnerGeneration}

// nodeAuth is the Authorization a request goes to the nodes with: the
// client's bearer token as is (the nodes apply its scope as well), else
// the router's node token for a client that authenticated with a
// certificate.
func (r *Router) nodeAuth(w http.ResponseWriter, req *http.Request) (string, bool) {
	if h := req.Header.Get("Authorization"); h != "" {
		return h, true
	}
	if r.cfg.NodeToken != "" {
		return "Bearer " + r.cfg.NodeToken, true
	}
	api.WriteError(w, http.StatusForbidden, api.CodeForbidden,
		"this router has no credential for the nodes (fleet_node_token_file): authenticate with a bearer token")
	return "", false
}

// readBody reads a request body whole (it may be sent more than once),
// bounded in size and time as the node bounds it.
func (r *Router) readBody(w http.ResponseWriter, req *http.Request) ([]byte, bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(r.cfg.BodyReadTimeout))
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.cfg.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		api.WriteError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge, fmt.Sprintf("request body over %d bytes", r.cfg.MaxBodyBytes))
		return nil, false
	case errors.Is(err, net.ErrClosed), isTimeout(err):
		w.Header().Set("Connection", "close")
		api.WriteError(w, http.StatusRequestTimeout, api.CodeTimeout, "the request body did not arrive in time")
		return nil, false
	case err != nil:
		api.WriteError(w, http.StatusBadRequest, api.CodeBadRequest, "read the request body: "+err.Error())
		return nil, false
	}
	return body, true
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// send makes one request to node; reused reports whether it went on a
// kept-alive connection.
func (r *Router) send(req *http.Request, node Node, auth string, gen uint64, body []byte) (resp *http.Response, reused bool, err error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	return r.sendBody(req, node, auth, gen, rd, int64(len(body)))
}

// sendBody is send with a body read as it is sent (size n, -1 when
// unknown): a streamed upload, which cannot be sent twice.
func (r *Router) sendBody(req *http.Request, node Node, auth string, gen uint64, rd io.Reader, n int64) (resp *http.Response, reused bool, err error) {
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
	out, err := http.NewRequestWithContext(ctx, req.Method, node.URL+req.URL.RequestURI(), rd)
	if err != nil {
		return nil, false, err
	}
	if rd != http.NoBody {
		out.ContentLength = n
	}
	for k, vs := range req.Header {
		out.Header[k] = vs
	}
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Header.Set("Authorization", auth)
	if gen > 0 {
		out.Header.Set(api.HeaderOwnerGeneration, strconv.FormatUint(gen, 10))
	}
	resp, err = r.cfg.Transport.RoundTrip(out)
	return resp, reused, err
}

// forward sends req to node and relays the answer, unless the node is
// gone, draining or fences the generation: those the caller retries.
func (r *Router) forward(w http.ResponseWriter, req *http.Request, node Node, auth string, gen uint64, body []byte) outcome {
	resp, reused, err := r.send(req, node, auth, gen, body)
	if err != nil {
		// A kept-alive connection the node closed (it stopped) fails
		// the request without an answer: when the node no longer takes
		// connections, it is gone as if the dial had failed.
		if dialFailed(err) || reused && req.Context().Err() == nil && r.refuses(req.Context(), node) {
			return nodeGone
		}
		if req.Context().Err() == nil {
			api.WriteError(w, http.StatusBadGateway, api.CodeNodeFailed, fmt.Sprintf("node %s: %v", node.Name, err))
		}
		return sent
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusConflict {
		code, peeked := peekCode(resp)
		switch {
		case resp.StatusCode == http.StatusServiceUnavailable && (code == api.CodeDraining || code == api.CodeClosed):
			return nodeDraining // closed: it shuts down without a drain
		case code == api.CodeFenced:
			return fenced
		}
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(peeked), resp.Body), resp.Body}
	}
	relay(w, resp, node.Name)
	return sent
}

// dialFailed: the request never reached the node (no connection), so
// resending it elsewhere runs nothing twice.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// refuses reports whether node refuses a new connection.
func (r *Router) refuses(ctx context.Context, node Node) bool {
	u, err := url.Parse(node.URL)
	if err != nil {
		return true
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
	if err != nil {
		return true
	}
	_ = c.Close()
	return false
}

// peekCode reads an error body's code (up to maxPeek bytes).
func peekCode(resp *http.Response) (string, []byte) {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxPeek))
	var eb api.ErrorBody
	_ = json.Unmarshal(b, &eb)
	return eb.Code, b
}

// relayBufs are relay's copy buffers: one per answer in flight, not one
// allocated (and zeroed, and collected) per request.
var relayBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// relay copies node's answer to the client, flushing each chunk as it
// arrives: a streamed cell's events reach the client as the node sends
// them. An event stream (NDJSON) goes out in whole lines, and when the
// node's answer breaks off (the node died mid-cell) relay ends it as the
// node ends a failed request, with an error event (node_failed): the
// status line went out with the first event, so a 502 no longer can.
func relay(w http.ResponseWriter, resp *http.Response, node string) {
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = vs
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	bp := relayBufs.Get().(*[]byte)
	defer relayBufs.Put(bp)
	buf, held, midLine := *bp, 0, false
	lines := isEventStream(resp.Header)
	for {
		n, err := resp.Body.Read(buf[held:])
		n += held
		end := n
		if lines && err != io.EOF && (err != nil || n < len(buf)) {
			// Hold back an unfinished line: a broken answer's last piece
			// is dropped. A line longer than the buffer goes as it comes.
			if end = bytes.LastIndexByte(buf[:n], '\n') + 1; end == 0 && midLine {
				end = n
			}
		}
		if end > 0 {
			if _, werr := w.Write(buf[:end]); werr != nil {
				return // the client went away; closing the body ends the node's request
			}
			_ = rc.Flush()
			midLine = buf[end-1] != '\n'
		}
		held = copy(buf, buf[end:n])
		if err == nil {
			continue
		}
		if lines && err != io.EOF {
			endBroken(w, rc, node, err, midLine)
		}
		return
	}
}

// isEventStream reports an NDJSON answer (a streamed cell, a drain's
// progress).
func isEventStream(h http.Header) bool {
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.TrimSpace(ct) == "application/x-ndjson"
}

// endBroken ends an event stream the node broke off with a last error
// event (after a newline when a line longer than the buffer was cut).
func endBroken(w http.ResponseWriter, rc *http.ResponseController, node string, cause error, midLine bool) {
	if midLine {
		_, _ = io.WriteString(w, "\n")
	}
	ev := api.Event{Event: api.EventError, Code: api.CodeNodeFailed,
		Error: fmt.Sprintf("node %s failed mid-answer: %v", node, cause)}
	_ = json.NewEncoder(w).Encode(ev) // the client may be gone too
	_ = rc.Flush()
}
