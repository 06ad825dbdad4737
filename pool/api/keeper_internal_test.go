//go:build unix

package api

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// keeperServer serves h on a Unix socket and counts the connections it
// accepted and saw closed.
func keeperServer(t *testing.T, h http.HandlerFunc) (socket string, accepted, closed *atomic.Int32) {
	t.Helper()
	dir, err := os.MkdirTemp("", "kpkeep")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket = filepath.Join(dir, "k.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	accepted, closed = new(atomic.Int32), new(atomic.Int32)
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			accepted.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served
	})
	return socket, accepted, closed
}

// get sends one request through k and reads its answer to EOF.
func get(k *connKeeper) error {
	req, err := http.NewRequest(http.MethodGet, "http://kernpool/v1/health", nil)
	if err != nil {
		return err
	}
	resp, err := k.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// A connection idle longer than the keeper's idle timeout is closed, not
// reused (the daemon's own idle timeout is longer, so the client never
// writes into a connection the daemon is closing).
func TestKeeperIdleTimeout(t *testing.T) {
	sock, accepted, closed := keeperServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "{}\n") })
	k := newTransport(sock).(*connKeeper)
	defer k.CloseIdleConnections()
	for range 2 {
		if err := get(k); err != nil {
			t.Fatal(err)
		}
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("within the idle timeout: %d connections, want 1", n)
	}
	k.idleTimeout = time.Nanosecond
	time.Sleep(time.Millisecond)
	if err := get(k); err != nil {
		t.Fatal(err)
	}
	if n := accepted.Load(); n != 2 {
		t.Fatalf("past the idle timeout: %d connections, want 2", n)
	}
	deadline := time.Now().Add(testenv.Patience)
	for closed.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := closed.Load(); n != 1 {
		t.Fatalf("the expired connection: %d closed, want 1", n)
	}
}

// At most maxIdle connections stay idle; the others are closed when their
// request ends.
func TestKeeperIdleCap(t *testing.T) {
	const conc = maxIdleConns + 4
	var arrived sync.WaitGroup
	arrived.Add(conc)
	sock, accepted, closed := keeperServer(t, func(w http.ResponseWriter, _ *http.Request) {
		arrived.Done()
		arrived.Wait() // every request holds its own connection
		_, _ = io.WriteString(w, "{}\n")
	})
	k := newTransport(sock).(*connKeeper)
	var done sync.WaitGroup
	for range conc {
		done.Add(1)
		go func() {
			defer done.Done()
			if err := get(k); err != nil {
				t.Error(err)
			}
		}()
	}
	done.Wait()
	k.mu.Lock()
	idle := len(k.idle)
	k.mu.Unlock()
	if n := accepted.Load(); n != conc || idle != maxIdleConns {
		t.Fatalf("%d concurrent requests: %d connections, %d idle; want %d, %d", conc, n, idle, conc, maxIdleConns)
	}
	deadline := time.Now().Add(testenv.Patience)
	for closed.Load() != conc-maxIdleConns && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := closed.Load(); n != conc-maxIdleConns {
		t.Fatalf("%d connections closed, want %d", n, conc-maxIdleConns)
	}
	k.CloseIdleConnections()
	for closed.Load() != conc && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := closed.Load(); n != conc {
		t.Fatalf("after CloseIdleConnections: %d closed, want %d", n, conc)
	}
}

// Closing a body from another goroutine ends a read blocked on a stream
// that sends nothing more (a client giving up on a streamed cell), and
// the connection is closed, not reused.
func TestKeeperCloseUnblocksStreamRead(t *testing.T) {
	release := make(chan struct{})
	socket, _, closed := keeperServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select { // a stream that stalls until the client goes
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	k := newTransport(socket).(*connKeeper)
	req, err := http.NewRequest(http.MethodGet, "http://kernpool/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := k.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first\n" {
		t.Fatalf("first event: %q, %v", buf, err)
	}
	readDone := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(make([]byte, 16))
		readDone <- err
	}()
	closeDone := make(chan struct{})
	go func() {
		_ = resp.Body.Close()
		close(closeDone)
	}()
	select {
	case <-closeDone:
	case <-time.After(testenv.Patience):
		t.Fatal("Close blocked behind a stalled Read")
	}
	select {
	case err := <-readDone:
		if err == nil {
			t.Fatal("the blocked Read returned no error after Close")
		}
	case <-time.After(testenv.Patience):
		t.Fatal("Close did not end the blocked Read")
	}
	deadline := time.Now().Add(testenv.Patience)
	for closed.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := closed.Load(); n != 1 || len(k.idle) != 0 {
		t.Fatalf("after Close: server saw %d closed connections, %d idle kept", n, len(k.idle))
	}
}

// A body closed before EOF closes its connection at once, never keeps it
// idle (the rest of the answer would wait on it), also when nothing of
// the answer is left in the connection's buffer.
func TestKeeperBodyClosedEarlyNotKept(t *testing.T) {
	big := strings.Repeat("s", 1<<20)
	sock, accepted, closed := keeperServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		_, _ = io.WriteString(w, big)
	})
	k := newTransport(sock).(*connKeeper)
	defer k.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "http://kernpool/v1/spill", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := k.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	// Read what the header's read buffered: the rest is on the socket.
	kc := resp.Body.(*keptBody).kc
	if _, err := io.ReadFull(resp.Body, make([]byte, kc.br.Buffered())); err != nil || kc.br.Buffered() != 0 {
		t.Fatalf("reading the buffered part: %v, %d bytes still buffered", err, kc.br.Buffered())
	}
	_ = resp.Body.Close()
	k.mu.Lock()
	idle := len(k.idle)
	k.mu.Unlock()
	if idle != 0 {
		t.Fatalf("a body closed before EOF left %d idle connections, want 0", idle)
	}
	testenv.WaitFor(t, "the connection to be closed", func() bool { return closed.Load() == 1 })
	if n := accepted.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}
