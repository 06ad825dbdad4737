//go:build unix

package api_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// syncHTTP serves h on its own Unix socket beside the daemon's with a
// minimal synchronous HTTP/1.1 server (serveSync): the measuring stick
// for what net/http's server costs per request over a server doing the
// least a correct one must. It is a benchmark's instrument, not a
// server: it trusts its client, reads small bodies whole and knows no
// chunked bodies or Expect. It returns the socket.
func syncHTTP(b testing.TB, dir, name string, h http.Handler, watch hangUpWatch) string {
	socket := filepath.Join(dir, name)
	ln, err := net.Listen("unix", socket)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var conns sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	conns.Add(1)
	go func() {
		defer conns.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open[c] = true
			mu.Unlock()
			conns.Add(1)
			go func() {
				defer conns.Done()
				serveSync(ctx, c, h, watch)
				_ = c.Close()
			}()
		}
	}()
	b.Cleanup(func() {
		cancel()
		_ = ln.Close()
		mu.Lock()
		for c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	return socket
}

// hangUpWatch watches c for its client hanging up while a request runs,
// calling cancel if it does, until stop.
type hangUpWatch func(c net.Conn, br *bufio.Reader, cancel func()) (stop func())

// noWatch watches nothing: the floor of a server that would not notice a
// client going away during a cell.
func noWatch(net.Conn, *bufio.Reader, func()) func() { return func() {} }

// watchAfter is how long a request runs before serveSync starts reading
// for a hang-up: a cell as short as the benchmark's never starts that
// read (net/http's server starts it on every request), though the
// pending timer costs more than the read (docs/design.md).
const watchAfter = 2 * time.Millisecond

// serveSync serves requests on c one after the other in this goroutine:
// header deadline, request line, headers, a Content-Length body read
// whole, the handler under watch, then the response buffered and
// written at once.
func serveSync(ctx context.Context, c net.Conn, h http.Handler, watch hangUpWatch) {
	br := bufio.NewReaderSize(c, 4096)
	bw := bufio.NewWriterSize(c, 4096)
	for {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		r, err := readSync(br)
		if err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		rctx, cancel := context.WithCancel(ctx)
		r = r.WithContext(rctx)
		w := &syncWriter{conn: c, header: http.Header{}, status: http.StatusOK}
		stop := watch(c, br, cancel)
		h.ServeHTTP(w, r)
		stop()
		cancel()
		if w.flush(bw) != nil {
			return
		}
	}
}

// watchHangUp starts, after watchAfter, a read on c that cancels the
// request when the client goes; the returned stop ends it (a past
// deadline) and waits for it. The read peeks through br, so a byte of a
// next request stays buffered.
func watchHangUp(c net.Conn, br *bufio.Reader, cancel func()) (stop func()) {
	var mu sync.Mutex
	done, started := false, false
	var bg sync.WaitGroup
	t := time.AfterFunc(watchAfter, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		started = true
		bg.Add(1)
		go func() {
			defer bg.Done()
			if _, err := br.Peek(1); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				cancel()
			}
		}()
	})
	return func() {
		t.Stop()
		mu.Lock()
		done = true
		mu.Unlock()
		if started {
			_ = c.SetReadDeadline(time.Unix(1, 0))
			bg.Wait()
			_ = c.SetReadDeadline(time.Time{})
		}
	}
}

// readSync parses one request: "METHOD target HTTP/1.1", headers up to
// a blank line, and a Content-Length body read whole.
func readSync(br *bufio.Reader) (*http.Request, error) {
	line, err := syncLine(br)
	if err != nil {
		return nil, err
	}
	method, rest, ok1 := bytes.Cut(line, []byte(" "))
	target, proto, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 || string(proto) != "HTTP/1.1" {
		return nil, errors.New("bad request line")
	}
	u, err := url.ParseRequestURI(string(target))
	if err != nil {
		return nil, err
	}
	r := &http.Request{Method: string(method), URL: u, RequestURI: string(target), Proto: "HTTP/1.1",
		ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, RemoteAddr: "@"}
	for {
		line, err := syncLine(br)
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			break
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return nil, errors.New("bad header")
		}
		r.Header.Add(string(k), string(bytes.TrimSpace(v)))
	}
	r.Host = r.Header.Get("Host")
	r.Header.Del("Host")
	if cl := r.Header.Get("Content-Length"); cl != "" {
		n, err := strconv.ParseInt(cl, 10, 64)
		if err != nil || n < 0 || n > 1<<20 {
			return nil, errors.New("bad Content-Length")
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return nil, err
		}
		r.ContentLength = n
		r.Body = io.NopCloser(bytes.NewReader(body))
	} else {
		r.Body = http.NoBody
	}
	return r, nil
}

// syncLine returns one CRLF-terminated line without its end.
func syncLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")), nil
}

// syncWriter buffers a response whole; flush writes the status line,
// the headers with a Date and Content-Length (as net/http does for a
// small answer) and the body in one write. SetReadDeadline is there for
// http.ResponseController (the API's body deadline).
type syncWriter struct {
	conn   net.Conn
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (w *syncWriter) Header() http.Header { return w.header }

func (w *syncWriter) WriteHeader(status int) {
	if !w.wrote {
		w.status, w.wrote = status, true
	}
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.wrote = true
	return w.body.Write(p)
}

func (w *syncWriter) SetReadDeadline(t time.Time) error { return w.conn.SetReadDeadline(t) }

func (w *syncWriter) flush(bw *bufio.Writer) error {
	w.header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	w.header.Set("Content-Length", strconv.Itoa(w.body.Len()))
	_, _ = bw.WriteString("HTTP/1.1 " + strconv.Itoa(w.status) + " " + http.StatusText(w.status) + "\r\n")
	_ = w.header.Write(bw)
	_, _ = bw.WriteString("\r\n")
	_, _ = bw.Write(w.body.Bytes())
	return bw.Flush()
}
