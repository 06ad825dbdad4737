//go:build unix

package api

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// newTransport is the Client's round tripper on a Unix socket: a
// connKeeper.
func newTransport(socket string) transport {
	return &connKeeper{socket: socket, dialer: net.Dialer{Timeout: dialTimeout},
		maxIdle: maxIdleConns, idleTimeout: idleConnTimeout}
}

// connKeeper is an http.RoundTripper for one Unix socket that writes each
// request and reads its response on the caller's goroutine, with the
// standard library's own serialisation ((*http.Request).Write,
// http.ReadResponse). http.Transport hands every request to a writer
// goroutine and the response back from a reader goroutine: two goroutine
// wake-ups per request, about 18 us of a warm cell's round trip on the
// 2-core development host.
//
// Reuse rules: a connection goes back to the idle list only when its
// response body was read to EOF with nothing left over, neither side
// asked for Connection: close, and the request's context was not
// canceled. Canceling the context closes the connection (the daemon then
// interrupts the cell). An idle connection is checked with a
// non-blocking peek before reuse: one the daemon closed (idle timeout,
// restart) is dropped and a new one dialed.
type connKeeper struct {
	socket      string
	dialer      net.Dialer
	maxIdle     int           // idle connections kept at most
	idleTimeout time.Duration // an idle connection older than this is closed

	mu   sync.Mutex
	idle []*keptConn // most recently used last
}

// keptConn is one connection with its buffers.
type keptConn struct {
	conn      net.Conn
	raw       syscall.RawConn // for the liveness peek; nil when unavailable
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time

	peekFn  func(uintptr) bool // kc.recvPeek
	peekBuf [1]byte
	peekN   int
	peekErr error
}

// RoundTrip implements http.RoundTripper.
func (k *connKeeper) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeRequestBody(req)
		return nil, err
	}
	kc, err := k.get(ctx)
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	stop := neverCanceled
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { _ = kc.conn.Close() })
	}
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = kc.conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	// Write closes req.Body.
	werr := req.Write(kc.bw)
	if werr == nil {
		werr = kc.bw.Flush()
	}
	// A daemon that stopped reading may have answered before the write
	// failed (413 to a body over its limit, 503 to a connection over its
	// cap): when an answer waits, read it, as http.Transport does.
	if werr != nil && kc.peek() != peekData {
		return fail(werr)
	}
	resp, err := http.ReadResponse(kc.br, req)
	if err != nil {
		return fail(cmp.Or(werr, err))
	}
	body := &keptBody{body: resp.Body, ctx: ctx, k: k, kc: kc, stop: stop,
		reusable: werr == nil && !req.Close && !resp.Close}
	if resp.Body == http.NoBody {
		body.release(true) // nothing to read: the connection is free now
	}
	resp.Body = body
	return resp, nil
}

// neverCanceled is the stop function for a context without Done.
func neverCanceled() bool { return true }

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// get returns a live idle connection or dials a new one.
func (k *connKeeper) get(ctx context.Context) (*keptConn, error) {
	now := time.Now()
	for {
		k.mu.Lock()
		n := len(k.idle)
		if n == 0 {
			k.mu.Unlock()
			break
		}
		kc := k.idle[n-1]
		k.idle[n-1] = nil
		k.idle = k.idle[:n-1]
		k.mu.Unlock()
		if now.Sub(kc.idleSince) < k.idleTimeout && kc.alive() {
			return kc, nil
		}
		_ = kc.conn.Close()
	}
	c, err := k.dialer.DialContext(ctx, "unix", k.socket)
	if err != nil {
		return nil, err
	}
	kc := &keptConn{conn: c, br: bufio.NewReader(c), bw: bufio.NewWriter(c)}
	if sc, ok := c.(syscall.Conn); ok {
		kc.raw, _ = sc.SyscallConn()
	}
	kc.peekFn = kc.recvPeek
	return kc, nil
}

// put makes kc idle, or closes it when the idle list is full.
func (k *connKeeper) put(kc *keptConn) {
	kc.idleSince = time.Now()
	k.mu.Lock()
	if len(k.idle) < k.maxIdle {
		k.idle = append(k.idle, kc)
		kc = nil
	}
	k.mu.Unlock()
	if kc != nil {
		_ = kc.conn.Close()
	}
}

// CloseIdleConnections closes the idle connections (http.Client calls it).
func (k *connKeeper) CloseIdleConnections() {
	k.mu.Lock()
	idle := k.idle
	k.idle = nil
	k.mu.Unlock()
	for _, kc := range idle {
		_ = kc.conn.Close()
	}
}

// alive reports whether an idle connection can carry a request: the peer
// has not closed it and has sent nothing unasked.
func (kc *keptConn) alive() bool { return kc.peek() == peekNothing }

// peekResult is what a non-blocking look at a connection found.
type peekResult int

const (
	peekNothing peekResult = iota // open, no bytes waiting (or no raw conn)
	peekData                      // bytes wait to be read
	peekGone                      // closed by the peer, or broken
)

// peek looks at the connection without blocking or consuming (recv with
// MSG_PEEK|MSG_DONTWAIT).
func (kc *keptConn) peek() peekResult {
	if kc.raw == nil {
		return peekNothing
	}
	if err := kc.raw.Read(kc.peekFn); err != nil {
		return peekGone
	}
	switch {
	case kc.peekN > 0:
		return peekData
	case kc.peekN < 0 && errors.Is(kc.peekErr, unix.EAGAIN):
		return peekNothing
	}
	return peekGone // 0 bytes: EOF; or an error
}

// recvPeek is peek's syscall, made once per connection as kc.peekFn so
// that peek allocates nothing.
func (kc *keptConn) recvPeek(fd uintptr) bool {
	kc.peekN, _, kc.peekErr = unix.Recvfrom(int(fd), kc.peekBuf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	if kc.peekErr != nil {
		kc.peekN = -1
	}
	return true // never wait for readiness
}

// keptBody is a response body that hands its connection back to the
// keeper once read to EOF, and closes it when closed earlier.
type keptBody struct {
	body     io.ReadCloser
	ctx      context.Context // the request's
	k        *connKeeper
	kc       *keptConn
	stop     func() bool // stops the context's close of kc
	reusable bool        // neither side said Connection: close

	mu   sync.Mutex
	done bool // kc handed back or closed; body no longer read
}

// Read reads the body. It does not hold mu while it waits, so that Close
// from another goroutine can close the connection and end a stream's
// blocked read, as http.Transport's bodies allow.
func (b *keptBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	done := b.done
	b.mu.Unlock()
	if done {
		return 0, io.EOF
	}
	n, err := b.body.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done { // closed meanwhile: the connection is gone
		return n, cmp.Or(err, io.EOF)
	}
	switch {
	case err == io.EOF:
		b.release(true)
	case err != nil:
		b.release(false)
		if b.ctx.Err() != nil {
			err = b.ctx.Err() // the context's close broke the read
		}
	}
	return n, err
}

// Close closes the connection unless the body was read to EOF.
func (b *keptBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done {
		b.release(false) // closed before EOF: never reused
	}
	return nil
}

// release ends the body's use of its connection: back to the idle list
// when the whole response was read (eof), nothing follows it, it may be
// kept alive and the context's close did not start; else closed.
func (b *keptBody) release(eof bool) {
	b.done = true
	notCanceled := b.stop()
	if eof && b.reusable && notCanceled && b.kc.br.Buffered() == 0 {
		b.k.put(b.kc)
		return
	}
	_ = b.kc.conn.Close()
}
