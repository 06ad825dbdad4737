package daemon_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
)

// TestShutdownAnswersARequestInFlight: a request whose body is still
// arriving when Shutdown stops the HTTP server gets its answer (503, the
// pool is closed) instead of a cut connection: the server's own shutdown
// waits for it (a few seconds at most) before closing connections.
func TestShutdownAnswersARequestInFlight(t *testing.T) {
	cfg := testConfig(t)
	ctx := context.Background()
	d, logs, served := serveLogged(t, cfg)
	conn, err := net.Dial("unix", cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Minute)) // only stops a hung test
	body := `{"owner": "alice", "code": "print(1)"}`
	head := "POST /v1/execute HTTP/1.1\r\nHost: kernpool\r\nContent-Type: application/json\r\n" +
		"Expect: 100-continue\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	if _, err := io.WriteString(conn, head+body[:10]); err != nil {
		t.Fatal(err)
	}
	// 100 Continue: the handler is reading the body.
	br := bufio.NewReader(conn)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("waiting for 100 Continue: %q, %v", line, err)
	}
	if _, err := br.ReadString('\n'); err != nil { // the blank line ending it
		t.Fatal(err)
	}
	shut := make(chan error, 1)
	go func() { shut <- d.Shutdown(ctx) }()
	// The socket goes when the HTTP server's shutdown closes its listener.
	for {
		if _, err := os.Stat(cfg.Socket); errors.Is(err, os.ErrNotExist) {
			break
		}
		select {
		case err := <-shut:
			t.Fatalf("Shutdown returned %v with a request in flight", err)
		case <-time.After(time.Millisecond):
		}
	}
	if _, err := io.WriteString(conn, body[10:]); err != nil {
		t.Fatalf("the rest of the body: %v", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the answer to the request in flight: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(got), `"closed"`) {
		t.Errorf("answer %d %s, want 503 closed", resp.StatusCode, got)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	// A clean stop: nothing timed out, no cell was cut short, no drain ran.
	for _, line := range []string{"HTTP shutdown timed out", "pool closed with cells still running", "drain finished"} {
		if strings.Contains(logs.String(), line) {
			t.Errorf("a clean Shutdown logged %q:\n%s", line, logs)
		}
	}
}

// TestShutdownPastItsContext: a cell still running when Shutdown's
// context ends is killed (its result says interrupted), Shutdown returns
// the context's error and the log says cells were killed.
func TestShutdownPastItsContext(t *testing.T) {
	cfg := testConfig(t)
	d, logs, served := serveLogged(t, cfg)
	c := api.NewClient(cfg.Socket)
	defer c.CloseIdleConnections()
	called := make(chan struct{})
	mark := pool.ToolHandlerFunc(func(context.Context, pool.ToolCall) (string, error) { close(called); return "", nil })
	busy := make(chan *pool.Result, 1)
	go func() {
		res, err := c.ExecuteStream(context.Background(), pool.Request{Owner: "long", Tools: []string{"mark"},
			Code: "import kernpool_tools as t, time\nt.mark()\nwhile True:\n    time.sleep(0.05)"}, mark)
		if err != nil {
			t.Errorf("the long cell: %v", err)
		}
		busy <- res
	}()
	<-called
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no time for the running cell
	if err := d.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown with a cell running past its context: %v, want context.Canceled", err)
	}
	if res := <-busy; res == nil || res.Status != pool.StatusInterrupted {
		t.Errorf("the cell cut short: %+v, want interrupted", res)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if !strings.Contains(logs.String(), "pool closed with cells still running; they were killed") {
		t.Errorf("no warning that cells were killed:\n%s", logs)
	}
}

// TestDrainedShutdownSaysDrainFinished: a Shutdown after Drain logs
// "drain finished" with its counts (the operator's sign the drain is
// complete); a plain Shutdown does not (TestShutdownAnswersARequestInFlight).
func TestDrainedShutdownSaysDrainFinished(t *testing.T) {
	cfg := testConfig(t)
	d, logs := newLogged(t, cfg)
	d.Drain()
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if !strings.Contains(logs.String(), "drain finished: saved=0 failed=0 kernels_to_save=0") {
		t.Errorf("no drain finished line:\n%s", logs)
	}
}

// newLogged is a daemon on cfg with its log at info level kept for the
// test to read.
func newLogged(t *testing.T, cfg *daemon.Config) (*daemon.Daemon, *testenv.SyncBuffer) {
	t.Helper()
	logs := &testenv.SyncBuffer{}
	d, err := daemon.New(context.Background(), cfg, daemon.WithLogger(hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: logs})))
	if err != nil {
		t.Fatal(err)
	}
	return d, logs
}

// serveLogged is newLogged serving its socket; the caller's first
// request is served (Shutdown before Serve runs would refuse Serve).
func serveLogged(t *testing.T, cfg *daemon.Config) (*daemon.Daemon, *testenv.SyncBuffer, chan error) {
	t.Helper()
	d, logs := newLogged(t, cfg)
	ln, err := d.Listen()
	if err != nil {
		_ = d.Shutdown(context.Background())
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- d.Serve(ln) }()
	return d, logs, served
}

// TestDrainLogsProgress: while a drain waits for a running cell, the log
// says so every second (the operator's sign the drain is not stuck):
// "draining" with the cell running.
func TestDrainLogsProgress(t *testing.T) {
	d, logs, served := serveLogged(t, testConfig(t))
	ctx := context.Background()
	called, release := make(chan struct{}), make(chan struct{})
	gate := pool.ToolHandlerFunc(func(context.Context, pool.ToolCall) (string, error) {
		close(called)
		<-release
		return "", nil
	})
	cell := make(chan error, 1)
	go func() {
		_, err := api.NewClient(d.Config().Socket).ExecuteStream(ctx, pool.Request{Tools: []string{"gate"},
			Code: "import kernpool_tools as t\nt.gate()"}, gate)
		cell <- err
	}()
	<-called
	d.Drain()
	shut := make(chan error, 1)
	go func() { shut <- d.Shutdown(ctx) }()
	const want = "draining: cells_running=1"
	for deadline := time.Now().Add(testenv.Patience); !strings.Contains(logs.String(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q line while the drain waits:\n%s", want, logs)
		}
	}
	close(release)
	if err := <-cell; err != nil {
		t.Errorf("the cell: %v", err)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	<-served
}
