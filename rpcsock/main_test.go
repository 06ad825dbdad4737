package rpcsock

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"

	"go.uber.org/goleak"

	"github.com/kernpool/kernpool/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func requireUnixSockets(t testing.TB) {
	t.Helper()
	if defaultNetwork != "unix" {
		t.Skip("Unix socket listener not used on this platform")
	}
}

// privateDir returns a fresh 0700 dir.
func privateDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(testTempDir(t), "k")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// listen opens a server in a private dir and closes it at cleanup.
func listen(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = privateDir(t)
	}
	if cfg.UID == 0 && os.Getuid() != 0 {
		cfg.UID = -1
	}
	s, err := Listen(cfg)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// dialNet opens a raw connection to the server's endpoint.
func dialNet(t testing.TB, s *Server) net.Conn {
	t.Helper()
	network, addr := "unix", s.Endpoint()
	if strings.HasPrefix(addr, "tcp://") {
		network, addr = "tcp", strings.TrimPrefix(addr, "tcp://")
	}
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// client speaks the wire protocol over one connection.
type client struct {
	c net.Conn
	r *bufio.Reader
}

func newClient(t testing.TB, s *Server) *client {
	c := dialNet(t, s)
	return &client{c: c, r: bufio.NewReader(c)}
}

// send writes one raw line and returns the decoded reply object.
func (cl *client) send(t testing.TB, line string) map[string]string {
	t.Helper()
	m, err := cl.trySend(line)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// trySend is send for goroutines other than the test's.
func (cl *client) trySend(line string) (map[string]string, error) {
	if _, err := cl.c.Write([]byte(line + "\n")); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	reply, err := cl.r.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("read reply to %.60q: %w", line, err)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(reply), &m); err != nil {
		return nil, fmt.Errorf("reply %q: %w", reply, err)
	}
	return m, nil
}

// req renders a request line.
func req(tool string, args any, token string) string {
	b, err := json.Marshal(map[string]any{"tool": tool, "args": args, "token": token})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// echo is a handler that answers "tool:args" and counts its calls.
type echo struct{ calls atomic.Int64 }

func (e *echo) HandleTool(_ context.Context, c pool.ToolCall) (string, error) {
	e.calls.Add(1)
	return c.Tool + ":" + string(c.Args), nil
}

// runPython runs script with the stub importable and a fake
// _kernpool_runtime pointing at s; it returns combined output.
func runPython(t testing.TB, s *Server, stub []byte, script string, args ...string) (string, error) {
	t.Helper()
	endpoint, token := "", ""
	if s != nil {
		endpoint, token = s.Endpoint(), s.Token()
	}
	return runPythonAt(t, endpoint, token, nil, stub, script, args...)
}

// runPythonAt is runPython against any endpoint; env (if not nil) replaces
// the fake runtime module with environment variables.
func runPythonAt(t testing.TB, endpoint, token string, env []string, stub []byte, script string, args ...string) (string, error) {
	t.Helper()
	dir := testTempDir(t)
	if err := os.WriteFile(filepath.Join(dir, StubName), stub, 0o600); err != nil {
		t.Fatal(err)
	}
	prelude := "import sys, types\nsys.path.insert(0, sys.argv[1])\n"
	if env == nil {
		prelude += "rt = types.ModuleType('_kernpool_runtime')\nrt.rpc_endpoint = sys.argv[2]\nrt.rpc_token = sys.argv[3]\n" +
			"sys.modules['_kernpool_runtime'] = rt\n"
	}
	prelude += "import kernpool_tools\n"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	argv := append([]string{"-c", prelude + script, dir, endpoint, token}, args...)
	cmd := exec.CommandContext(ctx, testenv.Python, argv...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE=1"}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
