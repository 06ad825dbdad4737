package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
)

// testConfig is a daemon config over a fresh dir with a cgroup parent of
// its own (a daemon sweeps its parent's leftovers at start, which must
// never reach another daemon's kernels on this host). Not root, it asks
// for the explicit process mode: sandbox refuses to start there.
func testConfig(t testing.TB) *daemon.Config {
	t.Helper()
	testenv.RequirePython(t)
	dir, err := os.MkdirTemp("", "kpdaemon")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil { // kernel uids traverse it
		t.Fatal(err)
	}
	cfg := daemon.DefaultConfig()
	cfg.Socket = filepath.Join(dir, "run", "kp.sock")
	cfg.StateDir = filepath.Join(dir, "state")
	cfg.Interpreter = testenv.Python
	cfg.Cgroup.Parent = fmt.Sprintf("kernpool-daemontest-%d-%s", os.Getpid(), filepath.Base(dir))
	if os.Geteuid() != 0 {
		cfg.Isolation = kernel.IsolationProcess
	}
	return cfg
}

// The importable daemon end to end: New, Listen, Serve, one cell over
// the API, a second daemon on the same state dir refused, Shutdown
// (socket gone, state dir free again).
func TestNewServeShutdown(t *testing.T) {
	cfg := testConfig(t)
	ctx := context.Background()
	d, err := daemon.New(ctx, cfg, daemon.WithLogger(testenv.Logger(t, hclog.Debug)), daemon.WithVersion("v9.9.9", "abc"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := d.Listen()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- d.Serve(ln) }()
	c := api.NewClient(cfg.Socket)
	defer c.CloseIdleConnections()
	h, err := c.Health(ctx)
	if err != nil || h.Version != "v9.9.9" || h.Isolation != d.Isolation() {
		t.Fatalf("health %+v, %v: want version v9.9.9 and isolation %q", h, err, d.Isolation())
	}
	res, err := c.Execute(ctx, pool.Request{Owner: "bob", Code: "x = 6 * 7\nprint(x)"})
	if err != nil || res.Status != pool.StatusSuccess || res.Output != "42\n" {
		t.Fatalf("execute: %+v, %v", res, err)
	}
	// A root daemon wires the sandbox: the kernel has a uid of its own, a
	// seccomp filter and no host network (pool.New alone gives none).
	if iso := res.Kernel.Isolation; os.Geteuid() == 0 && (iso == nil || iso.UID == 0 || !iso.Seccomp || iso.Network || iso.MemoryMax != 512<<20) {
		t.Errorf("a root daemon's kernel is not sandboxed: %+v", iso)
	}
	if _, err := daemon.New(ctx, cfg, daemon.WithLogger(hclog.NewNullLogger())); !errors.Is(err, daemon.ErrAlreadyServing) {
		t.Errorf("second daemon on the state dir: %v, want ErrAlreadyServing", err)
	}
	other := *cfg
	other.StateDir += "2"
	other.Cgroup.Parent += "-2"
	if d3, err := daemon.New(ctx, &other, daemon.WithLogger(hclog.NewNullLogger())); err != nil {
		t.Errorf("a daemon on another state dir: %v", err)
	} else {
		if _, err := d3.Listen(); !errors.Is(err, daemon.ErrAlreadyServing) {
			t.Errorf("second daemon on the socket: %v, want ErrAlreadyServing", err)
		}
		_ = d3.Shutdown(ctx)
	}
	if err := d.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
	if _, err := os.Stat(cfg.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after Shutdown: %v", err)
	}
	if ks := d.Pool().List(); len(ks) != 0 {
		t.Errorf("%d kernels live after Shutdown", len(ks))
	}
	d2, err := daemon.New(ctx, cfg, daemon.WithLogger(hclog.NewNullLogger()))
	if err != nil {
		t.Fatalf("a new daemon after Shutdown: %v", err)
	}
	_ = d2.Shutdown(ctx)
}

// New fails closed: a config the host cannot honour starts nothing.
func TestNewFailsClosed(t *testing.T) {
	cfg := testConfig(t)
	cfg.Interpreter = filepath.Join(testTempDir(t), "no-python")
	if d, err := daemon.New(context.Background(), cfg); err == nil {
		_ = d.Shutdown(context.Background())
		t.Fatal("New accepted a missing interpreter")
	}
	cfg = testConfig(t)
	cfg.MaxKernels = 0
	if _, err := daemon.New(context.Background(), cfg); !errors.Is(err, daemon.ErrConfig) {
		t.Fatalf("max_kernels 0: %v, want ErrConfig", err)
	}
}

// Reload applies new profile limits to kernels started from then on and
// refuses a configuration it cannot apply, keeping the running one;
// Handler serves the same API on a listener the embedder owns.
func TestReloadAndHandler(t *testing.T) {
	cfg := testConfig(t)
	ctx := context.Background()
	d, err := daemon.New(ctx, cfg, daemon.WithLogger(testenv.Logger(t, hclog.Debug)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Shutdown(ctx) }()
	c := serveHandler(t, d, cfg)

	next := *cfg
	next.Profiles = map[string]daemon.Profile{daemon.DefaultProfile: cfg.Profiles[daemon.DefaultProfile]}
	p := next.Profiles[daemon.DefaultProfile]
	p.MemoryMax = 96 << 20
	p.TimeoutAction = string(pool.TimeoutKill)
	next.Profiles[daemon.DefaultProfile] = p
	next.MaxKernelsPerOwner = 1
	if err := d.Reload(&next); err != nil {
		t.Fatal(err)
	}
	if got := d.Config(); got.Profiles[daemon.DefaultProfile].MemoryMax != 96<<20 || got.MaxKernelsPerOwner != 1 {
		t.Fatalf("after Reload: memory %d, per-owner cap %d", got.Profiles[daemon.DefaultProfile].MemoryMax, got.MaxKernelsPerOwner)
	}
	res, err := c.Execute(ctx, pool.Request{Owner: "carol", Code: "print(1)"})
	if err != nil || res.Output != "1\n" {
		t.Fatalf("execute through Handler: %+v, %v", res, err)
	}
	if iso := res.Kernel.Isolation; os.Geteuid() == 0 && (iso == nil || iso.MemoryMax != 96<<20) {
		t.Errorf("a kernel started after Reload has %+v, want memory_max 96MiB", iso)
	}
	if _, err := c.Execute(ctx, pool.Request{Owner: "carol", Tools: []string{"t"}, Code: "1"}); !errors.Is(err, pool.ErrQuota) {
		t.Errorf("a second kernel of carol under the reloaded per-owner cap of 1: %v, want ErrQuota", err)
	}
	// The reloaded timeout_action "kill": a timeout loses the state.
	slow, err := c.Execute(ctx, pool.Request{Owner: "carol", Code: "import time\ntime.sleep(30)", Timeout: 300 * time.Millisecond})
	if err != nil || slow.Status != pool.StatusTimeout || slow.Kernel.StatePreserved {
		t.Fatalf("a timeout after reloading timeout_action kill: %+v, %v", slow, err)
	}
	bad := next
	bad.MaxKernels = 0
	if err := d.Reload(&bad); !errors.Is(err, daemon.ErrConfig) {
		t.Fatalf("Reload with max_kernels 0: %v, want ErrConfig", err)
	}
	if got := d.Config(); got.MaxKernels != cfg.MaxKernels || got.Profiles[daemon.DefaultProfile].MemoryMax != 96<<20 {
		t.Errorf("a refused Reload changed the running config: max_kernels %d", got.MaxKernels)
	}
}

// TestFailedNewFreesItsStateDir: a New that fails after it locked the
// state dir releases it, so the operator's next start with a fixed
// config is not refused as "already serving"; neither the failed start's
// cleanup nor a clean Shutdown logs an error (releasing the isolation
// went well).
func TestFailedNewFreesItsStateDir(t *testing.T) {
	tok := []daemon.Credential{{Name: "a", SHA256: api.TokenDigest("t"), Admin: true}}
	for _, tc := range []struct {
		name string
		set  func(*daemon.Config)
	}{
		{"unreadable tls_cert", func(c *daemon.Config) {
			c.Network.Listen, c.Network.Tokens = "127.0.0.1:0", tok
			c.Network.TLSCert = filepath.Join(testTempDir(t), "missing.pem")
			c.Network.TLSKey = filepath.Join(testTempDir(t), "missing-key.pem")
		}},
		{"bad checkpoint_store", func(c *daemon.Config) { c.CheckpointStore.URL = "s3://" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			good := testConfig(t)
			bad := *good
			tc.set(&bad)
			var logs testenv.SyncBuffer
			log := hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: &logs})
			if d, err := daemon.New(ctx, &bad, daemon.WithLogger(log)); err == nil {
				_ = d.Shutdown(ctx)
				t.Fatal("New accepted the broken config")
			}
			d, err := daemon.New(ctx, good, daemon.WithLogger(log))
			if err != nil {
				t.Fatalf("New after a failed New on the same state dir: %v", err)
			}
			if err := d.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if s := logs.String(); s != "" {
				t.Errorf("errors logged by a failed start and a clean stop:\n%s", s)
			}
		})
	}
}

// TestProcessIsolationIsLogged: isolation = "process" says in the log,
// at start, that kernels are not sandboxed and what that lets them do.
func TestProcessIsolationIsLogged(t *testing.T) {
	cfg := testConfig(t)
	cfg.Isolation = kernel.IsolationProcess
	d, logs := newLogged(t, cfg)
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "isolation=process: kernels are NOT sandboxed: allows=") {
		t.Errorf("no warning that kernels are not sandboxed:\n%s", logs)
	}
}
