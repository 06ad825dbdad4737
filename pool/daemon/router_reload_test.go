//go:build unix

package daemon

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/redistest"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool/api"
)

// newTestRouter starts a router on a loopback listener address with its
// own Redis and one admin token; src is its config file.
func newTestRouter(t *testing.T) (r *Router, src string) {
	t.Helper()
	srv := redistest.Start(t)
	src = "listen = \"127.0.0.1:0\"\nfleet_redis = \"" + srv.URL + "\"\n" +
		"token \"admin\" {\n  sha256 = \"" + strings.Repeat("ab", 32) + "\"\n  admin = true\n}\n"
	cfg, err := ParseConfig([]byte(src), "router.hcl")
	if err != nil {
		t.Fatal(err)
	}
	r, err = NewRouter(context.Background(), cfg, "test", hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	return r, src
}

// TestRouterReloadKeepsFleetKeys: a router's SIGHUP rereads its
// credentials, and a reload that changes a fleet_* key is refused with
// the old ones kept (they are read once, at start).
func TestRouterReloadKeepsFleetKeys(t *testing.T) {
	r, src := newTestRouter(t)
	defer r.Shutdown(context.Background())
	same, _ := ParseConfig([]byte(src), "router.hcl")
	if err := r.Reload(same); err != nil {
		t.Fatalf("reload with the same keys: %v", err)
	}
	for _, extra := range []string{
		"fleet_kubernetes_service = \"kernpool-node\"\n",
		"fleet_node_ca = \"/etc/ssl/certs/ca-certificates.crt\"\n",
		"fleet_heartbeat = \"3s\"\n",
	} {
		next, err := ParseConfig([]byte(src+extra), "router.hcl")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Reload(next); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "fleet_*") {
			t.Errorf("reload adding %q: %v, want refused", strings.TrimSpace(extra), err)
		}
	}
}

// TestRouterStartRefusals: fleet_node_token_file must name a readable,
// non-empty file, fleet_node_ca a readable CA bundle, and
// fleet_kubernetes_service needs to run inside a cluster, or the router
// does not start (and says which key).
func TestRouterStartRefusals(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // outside a cluster, even in one
	srv := redistest.Start(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, keys, err string
	}{
		{"a token file", "fleet_node_token_file = \"" + write("token", "kp_node_0123456789abcdef\n") + "\"\n", ""},
		{"a missing token file", "fleet_node_token_file = \"" + filepath.Join(dir, "absent") + "\"\n", "fleet_node_token_file: "},
		{"a blank token file", "fleet_node_token_file = \"" + write("blank", " \n\t\n") + "\"\n", "is empty"},
		{"a missing node CA", "fleet_node_ca = \"" + filepath.Join(dir, "absent-ca.pem") + "\"\n", "fleet_node_ca"},
		{"kubernetes outside a cluster", "fleet_kubernetes_service = \"kernpool-node\"\n", "fleet_kubernetes_service: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "listen = \"127.0.0.1:0\"\nfleet_redis = \"" + srv.URL + "\"\n" + tc.keys +
				"token \"admin\" {\n  sha256 = \"" + strings.Repeat("ab", 32) + "\"\n  admin = true\n}\n"
			cfg, err := ParseConfig([]byte(src), "router.hcl")
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewRouter(context.Background(), cfg, "test", hclog.NewNullLogger())
			if err == nil {
				_ = r.Shutdown(context.Background())
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("NewRouter: %v", err)
			case tc.err != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("NewRouter: %v, want ErrConfig saying %q", err, tc.err)
			}
		})
	}
}

// TestRouterServes: a router serves its listener (GET /v1/ready needs no
// credential), refuses a second Serve, and Shutdown ends Serve cleanly.
func TestRouterServes(t *testing.T) {
	r, _ := newTestRouter(t)
	ln, err := r.Listen()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- r.Serve(ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/v1/ready")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	// No node is registered: not ready (503), but answered without a credential.
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /v1/ready on a router without nodes: %s, want 503", resp.Status)
	}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Serve(ln2); err == nil || !strings.Contains(err.Error(), "already serving") {
		t.Errorf("a second Serve: %v, want already serving", err)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after Shutdown: %v", err)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("Serve still running after Shutdown")
	}
}

// TestRouterShutdownPastItsContext: a router Shutdown whose context has
// ended closes the connections still in a request, rather than leave
// them to their clients.
func TestRouterShutdownPastItsContext(t *testing.T) {
	srv := redistest.Start(t)
	src := "listen = \"127.0.0.1:0\"\nfleet_redis = \"" + srv.URL + "\"\n" +
		"token \"admin\" {\n  sha256 = \"" + api.TokenDigest("kp_router_test") + "\"\n  admin = true\n}\n"
	cfg, err := ParseConfig([]byte(src), "router.hcl")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRouter(context.Background(), cfg, "test", hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := r.Listen()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.Serve(ln) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(testenv.Patience))
	body := `{"owner": "alice", "code": "1"}`
	if _, err := io.WriteString(conn, "POST /v1/execute HTTP/1.1\r\nHost: r\r\nAuthorization: Bearer kp_router_test\r\n"+
		"Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body[:5]); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("waiting for 100 Continue (the handler reads the body): %q, %v", line, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown past its context with a request in flight: %v, want context.Canceled", err)
	}
	// The rest of the body: a connection left open now gets its answer
	// (told at once), a closed one none (the write may fail: ignored).
	_, _ = io.WriteString(conn, body[5:])
	rest, err := io.ReadAll(br) // the blank line after 100 Continue, then EOF
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || strings.Contains(string(rest), "HTTP/1.1 ") {
		t.Fatalf("the connection in flight is still open after Shutdown (read %q, %v)", rest, err)
	}
}
