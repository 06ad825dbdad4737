//go:build unix

package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

func TestExecuteKeepsStateAndLists(t *testing.T) {
	ctx := testCtx(t)
	d := startDaemon(t, daemonOpts{})
	first := d.exec(t, "alice", "x = 1")
	if first.Status != pool.StatusSuccess || first.Kernel.Reused {
		t.Fatalf("first cell: %+v", first)
	}
	second := d.exec(t, "alice", "print(x)")
	if second.Output != "1\n" || !second.Kernel.Reused || second.Kernel.ExecutionCount != 2 {
		t.Fatalf("second cell: output %q, kernel %+v", second.Output, second.Kernel)
	}
	if second.Kernel.ID != first.Kernel.ID {
		t.Fatalf("kernel changed: %s then %s", first.Kernel.ID, second.Kernel.ID)
	}
	kernels, err := d.client.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(kernels) != 1 || kernels[0].ID != first.Kernel.ID || kernels[0].Owner != "alice" || kernels[0].Pid <= 0 {
		t.Fatalf("List = %+v", kernels)
	}
}

func TestCellErrorIsAResult(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	res := d.exec(t, "", "1/0")
	if res.Status != pool.StatusError || res.ExitCode != 1 || !strings.Contains(res.Error, "ZeroDivisionError") {
		t.Fatalf("result = %+v", res)
	}
}

func TestKillAndShutdownOwner(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx := testCtx(t)
	a := d.exec(t, "a", "1")
	b := d.exec(t, "b", "1")
	c := d.exec(t, "c", "1")
	pids := map[string]int{}
	kernels, err := d.client.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kernels {
		pids[k.ID] = k.Pid
	}
	if len(pids) != 3 {
		t.Fatalf("want 3 kernels, got %+v", kernels)
	}

	if err := d.client.Kill(ctx, a.Kernel.ID); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if !pidGone(pids[a.Kernel.ID]) {
		t.Errorf("killed kernel's pid %d still exists", pids[a.Kernel.ID])
	}
	err = d.client.Kill(ctx, a.Kernel.ID)
	var apiErr *api.APIError
	if !errors.Is(err, pool.ErrNotFound) || !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("second Kill = %v, want a 404 wrapping pool.ErrNotFound", err)
	}

	n, err := d.client.ShutdownOwner(ctx, "b")
	if err != nil || n != 1 {
		t.Fatalf("ShutdownOwner(b) = %d, %v; want 1", n, err)
	}
	if !pidGone(pids[b.Kernel.ID]) {
		t.Errorf("owner b's pid %d still exists", pids[b.Kernel.ID])
	}
	if n, err := d.client.ShutdownOwner(ctx, "nobody"); err != nil || n != 0 {
		t.Fatalf("ShutdownOwner(nobody) = %d, %v; want 0", n, err)
	}
	kernels, err = d.client.List(ctx)
	if err != nil || len(kernels) != 1 || kernels[0].ID != c.Kernel.ID {
		t.Fatalf("after kill and shutdown: %+v, %v; want only %s", kernels, err, c.Kernel.ID)
	}
}

func TestHealth(t *testing.T) {
	ctx := testCtx(t)
	d := startDaemon(t, daemonOpts{server: func(c *api.ServerConfig) { c.Isolation = "test-isolation" }})
	d.exec(t, "", "1")
	h, err := d.client.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != "ok" || h.Version != "test" || h.Kernels != 1 || h.Isolation != "test-isolation" || h.Goroutines <= 0 {
		t.Fatalf("health = %+v", h)
	}
	if h.Stats.KernelsStarted != 1 {
		t.Errorf("stats.kernels_started = %d, want 1", h.Stats.KernelsStarted)
	}
}

func TestDrainingRefusesNewCells(t *testing.T) {
	ctx := testCtx(t)
	d := startDaemon(t, daemonOpts{})
	d.server.SetDraining()
	_, err := d.client.Execute(ctx, pool.Request{Code: "1"})
	var apiErr *api.APIError
	if !errors.Is(err, pool.ErrClosed) || !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("Execute while draining = %v, want 503 closed", err)
	}
	h, err := d.client.Health(ctx)
	if err != nil || h.Status != "draining" {
		t.Fatalf("health while draining = %+v, %v", h, err)
	}
	if _, err := d.client.List(ctx); err != nil {
		t.Fatalf("List while draining: %v", err)
	}
}

func TestClosedPoolIs503(t *testing.T) {
	ctx := testCtx(t)
	d := startDaemon(t, daemonOpts{})
	if err := d.pool.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := d.client.Execute(ctx, pool.Request{Code: "1"})
	if !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("Execute on a closed pool = %v, want pool.ErrClosed", err)
	}
	// The documented answer (docs/api.md): 503 with code "closed".
	status, _, body := d.raw(t, http.MethodPost, "/v1/execute", `{"code":"1"}`)
	if status != 503 || body.Code != "closed" {
		t.Fatalf("execute on a closed pool: status %d code %q, want 503 \"closed\"", status, body.Code)
	}
}

func TestCapacityIs503WithRetryAfter(t *testing.T) {
	d := startDaemon(t, daemonOpts{pool: func(c *pool.Config) { c.MaxKernels = 1 }})
	bound := testCtx(t)
	ctx, cancel := context.WithCancel(bound)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = d.client.Execute(ctx, pool.Request{Owner: "busy", Code: "import time; time.sleep(30)"})
	}()
	t.Cleanup(func() { cancel(); recv(t, "the busy cell's Execute to return once canceled", done) })
	waitFor(t, "the busy kernel", func() bool {
		ks, _ := d.client.List(bound)
		return len(ks) == 1 && ks[0].Busy
	})
	status, hdr, body := d.raw(t, http.MethodPost, "/v1/execute", `{"owner":"other","code":"1"}`)
	if status != http.StatusServiceUnavailable || body.Code != api.CodeCapacity || hdr.Get("Retry-After") != "1" {
		t.Fatalf("over capacity: status %d, body %+v, Retry-After %q", status, body, hdr.Get("Retry-After"))
	}
}

// A client that disconnects interrupts its cell and keeps the kernel
// and its state; the server logs the disconnect with the kernel's id,
// once, and no other cell.
func TestClientDisconnectInterrupts(t *testing.T) {
	var logs testenv.SyncBuffer
	d := startDaemon(t, daemonOpts{server: func(c *api.ServerConfig) {
		c.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	}})
	warm := d.exec(t, "gone", "import os; x = 7; print(os.getpid())")
	bound := testCtx(t)
	ctx, cancel := context.WithCancel(bound)
	errc := make(chan error, 1)
	go func() {
		_, err := d.client.Execute(ctx, pool.Request{Owner: "gone", Code: "import time; time.sleep(60)"})
		errc <- err
	}()
	waitFor(t, "the cell to run", func() bool {
		ks, _ := d.client.List(bound)
		return len(ks) == 1 && ks[0].Busy
	})
	cancel()
	// cancel starts the request's AfterFunc callback, which closes the
	// connection: once it returned, the Execute must not still be parked
	// reading (checked at once, not by waiting out a read nothing ends).
	waitFor(t, "the canceled Execute to return or its callback to run", func() bool {
		if len(errc) > 0 {
			return true
		}
		if readingWithNoCallbackPending("TestClientDisconnectInterrupts") {
			t.Fatal("the canceled Execute still reads its connection after the cancel's callback ran: the connection was kept")
		}
		return false
	})
	if err := recv(t, "the canceled Execute to return", errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Execute = %v, want context.Canceled", err)
	}
	waitFor(t, "the interrupted cell to end", func() bool {
		ks, _ := d.client.List(bound)
		return len(ks) == 1 && !ks[0].Busy
	})
	next := d.exec(t, "gone", "import os; print(x, os.getpid())")
	if !next.Kernel.Reused || next.Output != "7 "+warm.Output {
		t.Fatalf("after the disconnect: %+v (first cell said %q)", next, warm.Output)
	}
	if st := d.pool.Stats(); st.Interrupted != 1 {
		t.Fatalf("interrupted counter %d, want 1", st.Interrupted)
	}
	const line = "client disconnected; its cell was interrupted"
	waitFor(t, "the disconnect's log line", func() bool { return strings.Contains(logs.String(), line) })
	if l := logs.String(); strings.Count(l, line) != 1 || !strings.Contains(l, "kernel="+warm.Kernel.ID) {
		t.Fatalf("logs %q: want one disconnect, of kernel %s", l, warm.Kernel.ID)
	}
}

// Without a daemon the client's error is ErrUnavailable, worded once:
// the socket and why the dial failed, not the request and the socket
// again (the dial's own wording).
func TestClientWithoutDaemon(t *testing.T) {
	ctx := testCtx(t)
	sock := shortTempDir(t) + "/absent.sock"
	c := api.NewClient(sock)
	defer c.CloseIdleConnections()
	_, err := c.Execute(ctx, pool.Request{Code: "1"})
	if !errors.Is(err, api.ErrUnavailable) || !errors.Is(err, syscall.ENOENT) || strings.Count(err.Error(), sock) != 1 {
		t.Fatalf("Execute without daemon = %v, want ErrUnavailable (ENOENT) naming the socket once", err)
	}
}

func TestOwnerNamesAreEscaped(t *testing.T) {
	ctx := testCtx(t)
	d := startDaemon(t, daemonOpts{})
	owner := "team/a b?#%"
	res := d.exec(t, owner, "1")
	ks, err := d.client.List(ctx)
	if err != nil || len(ks) != 1 || ks[0].Owner != owner {
		t.Fatalf("List = %+v, %v; want one kernel of %q", ks, err, owner)
	}
	n, err := d.client.ShutdownOwner(ctx, owner)
	if err != nil || n != 1 {
		t.Fatalf("ShutdownOwner(%q) = %d, %v; want 1 (kernel %s)", owner, n, err, res.Kernel.ID)
	}
}

func TestCheckAccessVetsRequestPaths(t *testing.T) {
	ctx := testCtx(t)
	var calls []string
	check := func(interp, cwd string) error {
		calls = append(calls, interp+"|"+cwd)
		if cwd == "/root" {
			return errors.New("cwd /root: not searchable by the kernel's uid")
		}
		return nil
	}
	d := startDaemon(t, daemonOpts{server: func(c *api.ServerConfig) { c.CheckAccess = check }})
	d.exec(t, "", "1") // defaults only: not checked
	_, err := d.client.Execute(ctx, pool.Request{Cwd: "/root", Code: "1"})
	var apiErr *api.APIError
	if !errors.Is(err, pool.ErrBadRequest) || !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "/root") {
		t.Fatalf("unusable cwd = %v, want a 400 naming it", err)
	}
	if res, err := d.client.Execute(ctx, pool.Request{Cwd: "/", Code: "import os; print(os.getcwd())"}); err != nil || res.Output != "/\n" {
		t.Fatalf("usable cwd = %+v, %v", res, err)
	}
	if want := []string{"|/root", "|/"}; strings.Join(calls, ",") != strings.Join(want, ",") {
		t.Fatalf("CheckAccess calls %q, want %q", calls, want)
	}
}
