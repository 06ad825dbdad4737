package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
)

// persistConfig is netConfig with the default profile's kernels saved
// when the pool stops them.
func persistConfig(t testing.TB) (*daemon.Config, *testCA) {
	cfg, ca := netConfig(t)
	p := cfg.Profiles[daemon.DefaultProfile]
	p.Persist, p.Spares = true, 0
	cfg.Profiles[daemon.DefaultProfile] = p
	cfg.DrainGrace = 2 * time.Minute
	return cfg, ca
}

// TestDrain: POST /v1/drain (the admin token, over TLS) makes the node
// refuse cells of new and existing owners with 503 "draining" and
// Retry-After, readiness 503; a running cell finishes; every persist
// kernel is saved; the progress stream ends "drained" with every kernel
// saved; and a daemon started on the same state dir restores each
// owner's variables.
func TestDrain(t *testing.T) {
	cfg, ca := persistConfig(t)
	n := startNetNode(t, cfg, ca)
	ctx := context.Background()
	admin := n.client(t, adminToken, "")
	alice := n.client(t, aliceToken, "")
	owners := []string{"alice", "acme/1", "acme/2"}
	for _, o := range owners {
		if res, err := admin.Execute(ctx, pool.Request{Owner: o, Code: fmt.Sprintf("x = %q", o)}); err != nil || res.Status != pool.StatusSuccess {
			t.Fatalf("execute %s: %+v, %v", o, res, err)
		}
	}
	// A running cell of "busy" waits for the answer to its tool call,
	// which the test gives once the drain refuses new cells; the cell
	// must finish and its kernel be saved.
	called, release := make(chan struct{}), make(chan struct{})
	gate := pool.ToolHandlerFunc(func(ctx context.Context, _ pool.ToolCall) (string, error) {
		close(called)
		select {
		case <-release:
			return "open", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	busy := make(chan *pool.Result, 1)
	go func() {
		res, err := admin.ExecuteStream(ctx, pool.Request{Owner: "busy", Tools: []string{"gate"},
			Code: "import kernpool_tools as t\nx = 'busy'\nprint(t.gate())"}, gate)
		if err != nil {
			t.Errorf("the running cell: %v", err)
		}
		busy <- res
	}()
	<-called
	var mu sync.Mutex
	var seen []api.DrainStatus
	final := make(chan *api.DrainStatus, 1)
	go func() {
		st, err := admin.Drain(ctx, func(s api.DrainStatus) { mu.Lock(); seen = append(seen, s); mu.Unlock() })
		if err != nil {
			t.Errorf("drain stream: %v", err)
		}
		final <- st
	}()
	<-n.d.DrainRequested()
	shut := make(chan error, 1)
	go func() { shut <- n.d.Shutdown(ctx) }()

	for _, o := range []string{"alice", "newcomer"} {
		c := admin
		if o == "alice" {
			c = alice
		}
		_, err := c.Execute(ctx, pool.Request{Owner: o, Code: "1"})
		var ae *api.APIError
		if !errors.As(err, &ae) || ae.StatusCode != 503 || ae.Code != api.CodeDraining || ae.RetryAfter != time.Second {
			t.Errorf("a cell of %s during the drain: %v, want 503 draining with Retry-After 1", o, err)
		}
	}
	if st, err := alice.Ready(ctx); st != api.StateDraining || apiCode(err) != api.CodeDraining {
		t.Errorf("readiness while draining: %q, %v", st, err)
	}
	if h, err := n.local.Health(ctx); err != nil || h.Status != api.HealthDraining || h.State != api.StateDraining || h.Drain == nil || h.Drain.CellsRunning != 1 {
		t.Errorf("health while draining: %+v, %v", h, err)
	}
	close(release)
	if res := <-busy; res == nil || res.Output != "open\n" {
		t.Errorf("the running cell did not finish: %+v", res)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	st := <-final
	if st == nil || st.State != api.StateDrained || st.Saved != 4 || st.Failed != 0 || st.Remaining != 0 || st.KernelsToSave != 4 {
		t.Fatalf("the drain's last status: %+v, want drained with 4 saved", st)
	}
	mu.Lock()
	if len(seen) < 2 || seen[0].State != api.StateDraining || seen[0].Remaining != 4 {
		t.Errorf("progress: %+v, want it to start draining with 4 remaining", seen)
	}
	mu.Unlock()
	if err := n.d.DrainError(); err != nil {
		t.Errorf("DrainError after a complete drain: %v", err)
	}

	// Another daemon on the state dir restores each owner's state.
	next := *n.cfg
	next.Network = daemon.DefaultConfig().Network
	d2, err := daemon.New(ctx, &next, daemon.WithLogger(testenv.Logger(t, hclog.Info)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d2.Shutdown(ctx) }()
	for _, o := range append(owners, "busy") {
		req := pool.Request{Owner: o, Code: "print(x)"}
		if o == "busy" {
			req.Tools = []string{"gate"}
		}
		res, err := d2.Pool().Execute(ctx, req)
		if err != nil || res.Output != o+"\n" || !res.Kernel.Restored {
			t.Errorf("%s after the drain: %+v, %v; want x restored", o, res, err)
		}
	}
}

// TestDrainPastGrace: a cell still running when drain_grace ends is
// interrupted (KeyboardInterrupt keeps the kernel's state), so its
// persist kernel is idle when the pool closes and is saved, not lost.
func TestDrainPastGrace(t *testing.T) {
	cfg, ca := persistConfig(t)
	cfg.DrainGrace = 300 * time.Millisecond
	n := startNetNode(t, cfg, ca)
	ctx := context.Background()
	called := make(chan struct{})
	slow := pool.ToolHandlerFunc(func(context.Context, pool.ToolCall) (string, error) { close(called); return "", nil })
	busy := make(chan *pool.Result, 1)
	go func() {
		res, err := n.local.ExecuteStream(ctx, pool.Request{Owner: "long", Tools: []string{"mark"},
			Code: "import kernpool_tools as t, time\nx = 'kept'\nt.mark()\nwhile True:\n    time.sleep(0.05)"}, slow)
		if err != nil {
			t.Errorf("the long cell: %v", err)
		}
		busy <- res
	}()
	<-called
	n.d.Drain()
	grace, cancel := context.WithTimeout(ctx, cfg.DrainGrace)
	defer cancel()
	if err := n.d.Shutdown(grace); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if res := <-busy; res == nil || res.Status != pool.StatusInterrupted || !res.Kernel.StatePreserved {
		t.Errorf("the cell past the grace: %+v, want interrupted with its state kept", res)
	}
	if st := n.d.DrainStatus(); st.State != api.StateDrained || st.Saved != 1 || st.Failed != 0 {
		t.Errorf("drain past the grace: %+v, want the interrupted kernel saved", st)
	}
	if err := n.d.DrainError(); err != nil {
		t.Errorf("DrainError: %v", err)
	}
}

// TestDrainIncomplete: a drain that could not save a persist kernel (its
// checkpoint is over the owner's cap) says so: DrainError is
// ErrDrainIncomplete with the counts, so serve exits non-zero.
func TestDrainIncomplete(t *testing.T) {
	cfg, ca := persistConfig(t)
	cfg.Checkpoints.MaxBytesPerOwner = 4096
	n := startNetNode(t, cfg, ca)
	ctx := context.Background()
	res, err := n.local.Execute(ctx, pool.Request{Owner: "big", Code: "x = 'a' * 1000000"})
	if err != nil || res.Status != pool.StatusSuccess {
		t.Fatalf("the cell: %+v, %v", res, err)
	}
	n.d.Drain()
	if err := n.d.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if st := n.d.DrainStatus(); st.State != api.StateDrained || st.KernelsToSave != 1 || st.Saved != 0 || st.Failed != 1 {
		t.Errorf("drain status %+v, want drained with 1 of 1 kernels failed", st)
	}
	err = n.d.DrainError()
	if !errors.Is(err, daemon.ErrDrainIncomplete) || !strings.Contains(err.Error(), "1 of 1 persist kernels were not saved") {
		t.Errorf("DrainError = %v, want ErrDrainIncomplete saying 1 of 1 persist kernels were not saved", err)
	}
}
