//go:build unix

package api_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// connCounter counts the connections an http.Server accepted and closed,
// and keeps the idle ones (for a test to close from the server's side).
type connCounter struct {
	accepted, closed atomic.Int32
	mu               sync.Mutex
	idle             []net.Conn
}

func (c *connCounter) hook(conn net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		c.accepted.Add(1)
	case http.StateClosed, http.StateHijacked:
		c.closed.Add(1)
	case http.StateIdle:
		c.mu.Lock()
		c.idle = append(c.idle, conn)
		c.mu.Unlock()
	}
}

// closeIdle closes, from the server's side, every connection that went
// idle so far.
func (c *connCounter) closeIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.idle {
		_ = conn.Close()
	}
	c.idle = nil
}

// The typed client keeps one connection for a sequence of requests:
// cells, listings, health and error answers (a 400 and a 404) all reuse
// it.
func TestClientReusesItsConnection(t *testing.T) {
	var cc connCounter
	d := startDaemon(t, daemonOpts{connState: cc.hook, pool: func(c *pool.Config) { c.Modes = []string{"default"} }})
	ctx := testCtx(t)
	for i := range 5 {
		if res := d.exec(t, "reuse", "x = 1"); res.Status != pool.StatusSuccess {
			t.Fatalf("cell %d: %+v", i, res)
		}
		if _, err := d.client.Health(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := d.client.List(ctx); err != nil {
			t.Fatal(err)
		}
		var ae *api.APIError
		if _, err := d.client.Execute(ctx, pool.Request{Owner: "reuse", Mode: "nosuchmode", Code: "1"}); !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest {
			t.Fatalf("unknown mode: %v, want a 400", err)
		}
		if err := d.client.Kill(ctx, "knosuchkernel"); !errors.Is(err, pool.ErrNotFound) {
			t.Fatalf("kill of an unknown kernel: %v, want not found", err)
		}
	}
	if n := cc.accepted.Load(); n != 1 {
		t.Fatalf("25 requests used %d connections, want 1", n)
	}
}

// fakeDaemon is an http.Server on a Unix socket with a test's handler.
func fakeDaemon(t *testing.T, cc *connCounter, h http.HandlerFunc) *api.Client {
	t.Helper()
	sock := filepath.Join(shortTempDir(t), "fake.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ConnState: cc.hook}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	c := api.NewClient(sock)
	t.Cleanup(func() {
		c.CloseIdleConnections()
		_ = srv.Close()
		recv(t, "the fake daemon's Serve to return", served)
	})
	return c
}

// rawDaemon serves each request on a Unix socket with the bytes answer
// returns, written as they are; it counts the connections it accepted and
// those the client closed.
type rawDaemon struct {
	accepted, closed atomic.Int32
}

func startRawDaemon(t *testing.T, answer string) (*rawDaemon, *api.Client) {
	t.Helper()
	sock := filepath.Join(shortTempDir(t), "raw.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	rd := &rawDaemon{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			rd.accepted.Add(1)
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				br := bufio.NewReader(conn)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						rd.closed.Add(1) // the client went away
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(conn, answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	c := api.NewClient(sock)
	t.Cleanup(func() {
		c.CloseIdleConnections()
		_ = ln.Close()
		mu.Lock()
		for _, conn := range conns {
			_ = conn.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return rd, c
}

const healthJSON = `{"status":"ok","version":"fake"}` + "\n"

var healthAnswer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
	strconv.Itoa(len(healthJSON)) + "\r\n"

// A connection is reused only after a response read to EOF, with nothing
// after it, that allows keep-alive; otherwise the client closes it at
// once (not when it next needs one) and dials a new one.
func TestClientConnectionReuseRules(t *testing.T) {
	for _, tc := range []struct{ name, answer string }{
		// The answer says Connection: close but the connection stays open.
		{"close", healthAnswer + "Connection: close\r\n\r\n" + healthJSON},
		// Bytes after the answer (no daemon of ours sends any) must not be
		// read as the next request's answer.
		{"extra-bytes", healthAnswer + "\r\n" + healthJSON + "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nbogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd, c := startRawDaemon(t, tc.answer)
			for i := range 3 {
				if h, err := c.Health(testCtx(t)); err != nil || h.Version != "fake" {
					t.Fatalf("request %d: %+v, %v", i, h, err)
				}
				// The daemon accepts a connection before it answers on
				// it: a reused one is told at once.
				if n := rd.accepted.Load(); n != int32(i+1) {
					t.Fatalf("request %d came on a used connection: %d connections for %d requests", i, n, i+1)
				}
			}
			waitFor(t, "the client to close the connections", func() bool { return rd.closed.Load() == 3 })
		})
	}
	t.Run("kept", func(t *testing.T) {
		rd, c := startRawDaemon(t, healthAnswer+"\r\n"+healthJSON)
		for i := range 3 {
			if h, err := c.Health(testCtx(t)); err != nil || h.Version != "fake" {
				t.Fatalf("request %d: %+v, %v", i, h, err)
			}
		}
		if n, closed := rd.accepted.Load(), rd.closed.Load(); n != 1 || closed != 0 {
			t.Fatalf("3 plain answers: %d connections, %d closed; want 1, 0", n, closed)
		}
	})
	t.Run("empty-body", func(t *testing.T) {
		// An answer without a body leaves the connection free at once,
		// even when the caller never reads (here: it is not the JSON
		// Health expects, so Health fails before reading).
		rd, c := startRawDaemon(t, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		for i := range 3 {
			if _, err := c.Health(testCtx(t)); !errors.Is(err, api.ErrProtocol) {
				t.Fatalf("request %d: %v, want a protocol error", i, err)
			}
		}
		if n, closed := rd.accepted.Load(), rd.closed.Load(); n != 1 || closed != 0 {
			t.Fatalf("3 empty answers: %d connections, %d closed; want 1, 0", n, closed)
		}
	})
	t.Run("unread-body", func(t *testing.T) {
		var cc connCounter
		big := strings.Repeat("s", 1<<20)
		c := fakeDaemon(t, &cc, func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/spill/") {
				// With a length the body is read straight from the socket
				// once the buffered part is out: nothing stays buffered.
				w.Header().Set("Content-Length", strconv.Itoa(len(big)))
				_, _ = io.WriteString(w, big)
				return
			}
			_, _ = io.WriteString(w, healthJSON)
		})
		if _, err := c.Spill(testCtx(t), "k1", "f.txt", failingWriter{}); err == nil {
			t.Fatal("Spill into a failing writer: no error")
		}
		waitFor(t, "the abandoned connection to be closed", func() bool { return cc.closed.Load() == 1 })
		if _, err := c.Health(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		// Read to EOF, the same answer leaves the connection reusable.
		var sink strings.Builder
		if n, err := c.Spill(testCtx(t), "k1", "f.txt", &sink); err != nil || n != 1<<20 {
			t.Fatalf("Spill = %d, %v", n, err)
		}
		if _, err := c.Health(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if n := cc.accepted.Load(); n != 2 {
			t.Fatalf("%d connections, want 2 (one abandoned, one reused)", n)
		}
	})
	t.Run("server-closed-idle", func(t *testing.T) {
		var cc connCounter
		c := fakeDaemon(t, &cc, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, healthJSON)
		})
		if _, err := c.Health(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		// The daemon drops the idle connection (idle timeout, restart):
		// the next request notices before writing and dials anew.
		waitFor(t, "the connection to go idle", func() bool {
			cc.mu.Lock()
			defer cc.mu.Unlock()
			return len(cc.idle) == 1
		})
		cc.closeIdle()
		if _, err := c.Health(testCtx(t)); err != nil {
			t.Fatalf("after the daemon closed the idle connection: %v", err)
		}
		if n := cc.accepted.Load(); n != 2 {
			t.Fatalf("%d connections, want 2", n)
		}
	})
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A body over the daemon's limit gets the daemon's 413, although the
// daemon stops reading and closes the connection while the client is
// still writing the body.
func TestClientGetsTooLargeMidBody(t *testing.T) {
	d := startDaemon(t, daemonOpts{server: func(c *api.ServerConfig) { c.MaxBodyBytes = 64 << 10 }})
	huge := strings.Repeat("a", 8<<20) // far beyond the socket's buffers
	for range 2 {
		err := d.client.AnswerToolCall(testCtx(t), "c1", api.ToolAnswer{Result: &huge})
		var ae *api.APIError
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusRequestEntityTooLarge || ae.Code != api.CodeTooLarge {
			t.Fatalf("over the body limit: %v, want a 413 %s", err, api.CodeTooLarge)
		}
	}
}

// A client over the daemon's connection cap gets the daemon's 503 as an
// *APIError.
func TestClientOverConnectionCap(t *testing.T) {
	d := startDaemon(t, daemonOpts{maxConns: 1})
	hold, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	// hold came first, so it has the one slot; each of the client's
	// connections is refused (and not kept: the refusal says close).
	for range 3 {
		_, err := d.client.Health(testCtx(t))
		var ae *api.APIError
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable || ae.Code != api.CodeTooManyConnections || ae.RetryAfter <= 0 {
			t.Fatalf("over the cap: %v (%+v), want a 503 %s with Retry-After", err, ae, api.CodeTooManyConnections)
		}
	}
}

// An answer claiming a huge Content-Length and sending two bytes costs the
// client what arrived, not what was claimed.
func TestClientDoesNotAllocateAClaimedLength(t *testing.T) {
	_, c := startRawDaemon(t, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 268435456\r\n\r\n{}")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := c.Health(ctx)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a 2-byte body under a 256 MiB length decoded")
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("the client allocated %d bytes for a 2-byte body claiming 256 MiB", grew)
	}
}
