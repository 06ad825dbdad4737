package daemon_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
)

// serveHandler serves d's handler on a socket of the test's own.
func serveHandler(t *testing.T, d *daemon.Daemon, cfg *daemon.Config) *api.Client {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(filepath.Dir(cfg.StateDir), "own.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: d.Handler(), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c := api.NewClient(ln.Addr().String())
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// quotaWait runs cells of owner until one is refused by quota, and
// returns how many passed and the refusal's Retry-After.
func quotaWait(t *testing.T, c *api.Client, req pool.Request, max int) (int, time.Duration) {
	t.Helper()
	for n := 0; n <= max; n++ {
		_, err := c.Execute(context.Background(), req)
		var ae *api.APIError
		if errors.As(err, &ae) && errors.Is(err, pool.ErrQuota) {
			return n, ae.RetryAfter
		}
		if err != nil {
			t.Fatalf("cell %d of %s: %v", n+1, req.Owner, err)
		}
	}
	t.Fatalf("%d cells of %s passed, none was refused by quota", max+1, req.Owner)
	return 0, 0
}

// TestConfiguredQuotasHoldOnStartAndReload: the daemon runs with the
// quotas and idle timeout its config sets, not the defaults, from the
// start and after a reload that changes the cell rate: an owner gets as
// many cells as max_cells_per_minute_per_owner allows, then waits a
// token's share of the minute; a second kernel over max_kernels_per_owner
// waits for the first one's idle_timeout (2 h here, 30 min by default).
func TestConfiguredQuotasHoldOnStartAndReload(t *testing.T) {
	cfg := testConfig(t)
	cfg.IdleTimeout = 2 * time.Hour
	cfg.MaxKernelsPerOwner, cfg.MaxCellsPerMinutePerOwner = 1, 2
	ctx := context.Background()
	d, err := daemon.New(ctx, cfg, daemon.WithLogger(testenv.Logger(t, hclog.Info)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Shutdown(ctx) })
	c := serveHandler(t, d, cfg)

	kernelWait := func(owner string) time.Duration {
		t.Helper()
		if _, err := c.Execute(ctx, pool.Request{Owner: owner, Code: "1"}); err != nil {
			t.Fatal(err)
		}
		n, wait := quotaWait(t, c, pool.Request{Owner: owner, Tools: []string{"t"}, Code: "1"}, 0)
		if n != 0 || wait > 2*time.Hour || wait < 2*time.Hour-time.Minute {
			t.Fatalf("a second kernel of %s: refused after %d, Retry-After %s; want at once, about 2h", owner, n, wait)
		}
		return wait
	}
	kernelWait("k1")
	if n, wait := quotaWait(t, c, pool.Request{Owner: "r1", Code: "1"}, 3); n != 2 || wait > 30*time.Second || wait < 15*time.Second {
		t.Fatalf("2 cells a minute: %d passed, Retry-After %s; want 2, at most 30s", n, wait)
	}

	next := *cfg
	next.MaxCellsPerMinutePerOwner = 3
	if err := d.Reload(&next); err != nil {
		t.Fatal(err)
	}
	if n, wait := quotaWait(t, c, pool.Request{Owner: "r2", Code: "1"}, 4); n != 3 || wait > 20*time.Second || wait < 10*time.Second {
		t.Fatalf("3 cells a minute after the reload: %d passed, Retry-After %s; want 3, at most 20s", n, wait)
	}
	kernelWait("k2") // the kernel quota and idle timeout are as configured still
}
