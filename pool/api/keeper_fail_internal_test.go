//go:build unix

package api

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// rawServer answers each request read on a Unix socket with answer's
// bytes ("": none), then closes the connection, or with hold waits for
// the client to close it; it sends on got once it has read a request.
func rawServer(t *testing.T, answer string, hold bool) (socket string, got <-chan struct{}) {
	t.Helper()
	dir, err := os.MkdirTemp("", "kpraw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket = filepath.Join(dir, "r.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	gotc := make(chan struct{}, 16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				gotc <- struct{}{}
				_, _ = io.WriteString(conn, answer)
				if hold {
					_, _ = io.Copy(io.Discard, conn) // until the client closes
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return socket, gotc
}

// A request that fails after it was sent returns an error, never a nil
// response with a nil error: the daemon's own failure when the context
// is live, the context's error when canceling it broke the connection.
func TestKeeperFailureErrors(t *testing.T) {
	t.Run("garbage answer", func(t *testing.T) {
		socket, _ := rawServer(t, "garbage\r\n\r\n", true)
		k := newTransport(socket).(*connKeeper)
		defer k.CloseIdleConnections()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://kernpool/v1/health", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := k.RoundTrip(req)
		if err == nil || resp != nil || errors.Is(err, context.Canceled) {
			t.Fatalf("a garbage answer: %v, %v; want no response and the read's error", resp, err)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		socket, got := rawServer(t, "", true)
		k := newTransport(socket).(*connKeeper)
		defer k.CloseIdleConnections()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://kernpool/v1/health", nil)
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			resp *http.Response
			err  error
		}
		done := make(chan result, 1)
		go func() {
			resp, err := k.RoundTrip(req)
			done <- result{resp, err}
		}()
		recvOrFail(t, "the request to reach the server", got)
		cancel()
		r := recvOrFail(t, "RoundTrip to return", done)
		if r.resp != nil || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("canceled while waiting for the answer: %v, %v; want context.Canceled", r.resp, r.err)
		}
	})
}

// A response body broken before its end is an error to its reader,
// never a clean EOF: the daemon's own (a body shorter than its length),
// or the context's when canceling it broke the connection.
func TestKeeperBrokenBodyErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel bool
	}{{"cut short", false}, {"canceled", true}} {
		// Ten bytes announced, five sent; then the server closes (cut
		// short) or waits for the client to close (canceled).
		socket, _ := rawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234", tc.cancel)
		k := newTransport(socket).(*connKeeper)
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://kernpool/v1/health", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := k.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			t.Fatalf("%s: the first five bytes: %v", tc.name, err)
		}
		if tc.cancel {
			cancel()
		}
		rest, err := io.ReadAll(resp.Body)
		want := io.ErrUnexpectedEOF
		if tc.cancel {
			want = context.Canceled
		}
		if !errors.Is(err, want) || len(rest) != 0 {
			t.Errorf("%s: the rest of the body: %q, %v; want %v", tc.name, rest, err, want)
		}
		_ = resp.Body.Close()
		cancel()
		k.CloseIdleConnections()
	}
}

// bodyProbe is a request body that records its Close.
type bodyProbe struct {
	io.Reader
	closed bool
}

func (b *bodyProbe) Close() error { b.closed = true; return nil }

// A request that is never sent still has its body closed, as an
// http.RoundTripper must: canceled before it started, or no daemon to
// dial. A request without a body fails the same way.
func TestKeeperClosesUnsentBodies(t *testing.T) {
	socket, _ := rawServer(t, "", true)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name, socket string
		ctx          context.Context
	}{
		{"canceled", socket, canceled},
		{"no daemon", filepath.Join(filepath.Dir(socket), "absent.sock"), context.Background()},
	} {
		for _, withBody := range []bool{true, false} {
			k := newTransport(tc.socket).(*connKeeper)
			var body io.Reader
			probe := &bodyProbe{Reader: strings.NewReader("{}")}
			if withBody {
				body = probe
			}
			req, err := http.NewRequestWithContext(tc.ctx, http.MethodPost, "http://kernpool/v1/execute", body)
			if err != nil {
				t.Fatal(err)
			}
			if resp, err := k.RoundTrip(req); err == nil || resp != nil {
				t.Fatalf("%s: %v, %v; want an error", tc.name, resp, err)
			}
			if withBody && !probe.closed {
				t.Errorf("%s: the request body was not closed", tc.name)
			}
		}
	}
}

// recvOrFail receives from ch within testenv.Patience.
func recvOrFail[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(testenv.Patience)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("hang: waited for %s", what)
		panic("unreachable")
	}
}
