//go:build unix

package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/isolate/kinit"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/rpcsock"
)

// TestMain doubles as the kernel init step (isolate/kinit), which the
// examples' sandboxed daemon (example_test.go) starts its kernels through.
func TestMain(m *testing.M) {
	kinit.Main()
	goleak.VerifyTestMain(m)
}

// daemon is a real pool behind the real API handler on a real Unix socket.
type daemon struct {
	pool   *pool.Pool
	server *api.Server
	client *api.Client
	socket string
	state  string
}

type daemonOpts struct {
	pool   func(*pool.Config)
	server func(*api.ServerConfig)
	// maxConns, when set, serves through api.LimitConns(ln, maxConns).
	maxConns int
	// connState, when set, is the http.Server's ConnState hook.
	connState func(net.Conn, http.ConnState)
}

// shortTempDir returns a short private dir: a Unix socket path must fit
// in 108 bytes, which t.TempDir() of a long test name may exceed.
func shortTempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "kpapi")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func startDaemon(tb testing.TB, o daemonOpts) *daemon {
	tb.Helper()
	testenv.RequirePython(tb)
	dir := shortTempDir(tb)
	d := &daemon{socket: filepath.Join(dir, "run", "kp.sock"), state: filepath.Join(dir, "state")}
	if err := os.Mkdir(d.state, 0o711); err != nil {
		tb.Fatal(err)
	}
	pcfg := pool.Config{StateDir: d.state, DefaultInterpreter: testenv.Python, Tools: rpcsock.Factory{},
		// A generous interrupt grace: in a TCG guest on a loaded host (a
		// vCPU lagged 4-7 s) the default 2 s ran out before the interpreter
		// handled KeyboardInterrupt, killing the kernel an interrupt test
		// checks is kept.
		Policies: map[string]pool.CellPolicy{"default": {InterruptGrace: testenv.Patience}}}
	if o.pool != nil {
		o.pool(&pcfg)
	}
	p, err := pool.New(pcfg)
	if err != nil {
		tb.Fatalf("pool.New: %v", err)
	}
	scfg := api.ServerConfig{Version: "test", Isolation: "process-group"}
	if o.server != nil {
		o.server(&scfg)
	}
	ln, err := api.Listen(d.socket, nil)
	if err != nil {
		_ = p.Close(testCtx(tb))
		tb.Fatalf("Listen: %v", err)
	}
	d.pool, d.server = p, api.NewServer(p, scfg)
	srv := &http.Server{Handler: d.server, ReadHeaderTimeout: 5 * time.Second, ConnState: o.connState}
	served := make(chan struct{})
	var serveLn net.Listener = ln
	if o.maxConns > 0 {
		serveLn = api.LimitConns(ln, o.maxConns)
	}
	go func() {
		defer close(served)
		_ = srv.Serve(serveLn)
	}()
	d.client = api.NewClient(d.socket)
	tb.Cleanup(func() {
		d.client.CloseIdleConnections()
		// Every test ends its cells; one still running after 30 s is a bug
		// (Close then kills it, and the test says so instead of hanging).
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if tb.Failed() {
			// Nothing of a failed test is worth draining: kill at once,
			// so a cell a broken product left running (a mutant) does not
			// hold the cleanup for the whole bound.
			cancel()
		}
		if err := p.Close(ctx); err != nil && !tb.Failed() {
			tb.Errorf("pool.Close: %v (a cell was still running)", err)
		}
		if err := srv.Shutdown(ctx); err != nil {
			if !tb.Failed() {
				tb.Errorf("HTTP shutdown: %v (a handler did not return)", err)
			}
			_ = srv.Close()
		}
		recv(tb, "the HTTP server's Serve to return", served)
	})
	return d
}

// raw sends one request with a raw body and returns status, headers and
// the decoded error body (if any).
func (d *daemon) raw(tb testing.TB, method, path, body string) (int, http.Header, api.ErrorBody) {
	tb.Helper()
	c := &http.Client{Timeout: hangBound, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
		},
	}}
	defer c.CloseIdleConnections()
	var r io.Reader
	if body != "" {
		r = bytes.NewBufferString(body)
	}
	req, err := http.NewRequest(method, "http://kernpool"+path, r)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var eb api.ErrorBody
	if resp.StatusCode != http.StatusOK {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			tb.Errorf("%s %s: error Content-Type %q, want application/json (body %q)", method, path, ct, raw)
		}
		if err := json.Unmarshal(raw, &eb); err != nil {
			tb.Errorf("%s %s: error body is not JSON: %q", method, path, raw)
		}
	}
	return resp.StatusCode, resp.Header, eb
}

// expect sends one raw request and fails the test unless the answer has
// status and error code, and its message mentions each of want.
func (d *daemon) expect(tb testing.TB, method, path, body string, status int, code string, want []string) {
	tb.Helper()
	got, _, eb := d.raw(tb, method, path, body)
	if got != status || eb.Code != code {
		tb.Fatalf("status %d code %q (%q), want %d %q", got, eb.Code, eb.Error, status, code)
	}
	for _, w := range want {
		if !strings.Contains(eb.Error, w) {
			tb.Errorf("error %q does not mention %q", eb.Error, w)
		}
	}
}

// exec runs code for owner and fails the test on an API error.
func (d *daemon) exec(tb testing.TB, owner, code string) *pool.Result {
	tb.Helper()
	res, err := d.client.Execute(testCtx(tb), pool.Request{Owner: owner, Code: code})
	if err != nil {
		tb.Fatalf("Execute(%q): %v", code, err)
	}
	return res
}

// pidGone reports whether no process has pid (reaped, not a zombie of ours).
func pidGone(pid int) bool {
	err := syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}

// hangBound bounds every wait of a test, so that a hang fails the test
// with a message naming the wait instead of stalling the binary until
// -test.timeout with a goroutine dump. It detects hangs only, it asserts no
// speed: a healthy wait here takes milliseconds on loaded cores, seconds
// in a TCG guest whose vCPUs lag.
var hangBound = testenv.Patience

// testCtx returns a context that ends hangBound from now; the test fails
// with a clear message if any wait under it ran into that bound.
func testCtx(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	tb.Cleanup(func() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			tb.Errorf("a wait of this test ran into the %s hang bound: what it waited for never came", hangBound)
		}
		cancel()
	})
	return ctx
}

// recv receives one value from ch, failing the test if none comes within
// hangBound.
func recv[T any](tb testing.TB, what string, ch <-chan T) T {
	tb.Helper()
	timer := time.NewTimer(hangBound)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		tb.Fatalf("hang: waited %s for %s", hangBound, what)
		panic("unreachable")
	}
}

// waitFor polls cond (tests only; the product never polls) until it holds
// or testenv.Patience ends a hung test.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	testenv.WaitFor(tb, what, cond)
}
