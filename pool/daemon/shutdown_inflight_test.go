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
	"github.com/kernpool/kernpool/pool/daemon"
)

// TestShutdownAnswersARequestInFlight: a request whose body is still
// arriving when Shutdown stops the HTTP server gets its answer (503, the
// pool is closed) instead of a cut connection: the server's own shutdown
// waits for it (a few seconds at most) before closing connections.
func TestShutdownAnswersARequestInFlight(t *testing.T) {
	cfg := testConfig(t)
	ctx := context.Background()
	d, err := daemon.New(ctx, cfg, daemon.WithLogger(testenv.Logger(t, hclog.Debug)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := d.Listen()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- d.Serve(ln) }()
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
}
