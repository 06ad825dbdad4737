package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestSocketServerBounds: the API socket's slow-client bounds are the
// figures docs/api.md gives ("request headers must arrive within 10 s,
// kept-alive connections close after 2 minutes idle"). Waiting them out
// would take minutes, so the server's settings are checked.
func TestSocketServerBounds(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler(), hclog.NewNullLogger())
	if srv.ReadHeaderTimeout != 10*time.Second || srv.IdleTimeout != 2*time.Minute {
		t.Errorf("header timeout %v, idle timeout %v: docs/api.md says 10s and 2m0s", srv.ReadHeaderTimeout, srv.IdleTimeout)
	}
}

// TestPerOwnerUIDsSaySparesAreOff: with users.per_owner, a default
// profile asking for warm spares gets none, and the start log says why;
// without spares, or without per_owner, nothing is said.
func TestPerOwnerUIDsSaySparesAreOff(t *testing.T) {
	const line = "no warm spares: users.per_owner shares one uid per owner"
	for _, tc := range []struct {
		perOwner bool
		spares   int
		says     bool
	}{
		{true, 1, true},
		{true, 0, false},
		{false, 1, false},
	} {
		cfg := DefaultConfig()
		cfg.Users.PerOwner = tc.perOwner
		p := cfg.Profiles[DefaultProfile]
		p.Spares = tc.spares
		cfg.Profiles[DefaultProfile] = p
		var buf bytes.Buffer
		poolConfig(cfg, "/usr/bin/python3", seams{}, hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &buf}))
		if got := strings.Contains(buf.String(), line); got != tc.says {
			t.Errorf("per_owner %t, spares %d: logged %q, want the line %t", tc.perOwner, tc.spares, buf.String(), tc.says)
		}
	}
}

// TestProfileResources: what a profile's limits become in the kernel's
// cgroup: memory_swap_max is swap beyond memory_max (runtime-spec counts
// memory+swap; 0 is no swap: the total is memory_max alone), and
// cpu_weight's range 1-10000 spans cgroup v1's shares 2-262144 (0 leaves
// the host default).
func TestProfileResources(t *testing.T) {
	for _, tc := range []struct {
		name             string
		memory, swap     int64
		weight           uint64
		wantSwap         int64 // memory+swap; -1: no memory limit at all
		wantShares       uint64
		wantSharesAbsent bool
	}{
		{"swap beyond memory", 256 << 20, 64 << 20, 1, 320 << 20, 2, false},
		{"no swap", 256 << 20, 0, 10000, 256 << 20, 262144, false},
		{"one byte of swap", 256 << 20, 1, 1, 256<<20 + 1, 2, false},
		{"no memory limit, host cpu weight", 0, 64 << 20, 0, -1, 0, true},
	} {
		r := profileResources(Profile{MemoryMax: tc.memory, MemorySwapMax: tc.swap, CPUWeight: tc.weight})
		switch {
		case tc.wantSwap < 0 && r.Memory != nil:
			t.Errorf("%s: memory %+v, want no memory limit", tc.name, r.Memory)
		case tc.wantSwap >= 0 && (r.Memory == nil || r.Memory.Swap == nil || *r.Memory.Swap != tc.wantSwap):
			t.Errorf("%s: memory %+v, want memory+swap %d", tc.name, r.Memory, tc.wantSwap)
		case tc.wantSwap >= 0 && (r.Memory.Limit == nil || *r.Memory.Limit != tc.memory):
			t.Errorf("%s: memory limit %v, want memory_max %d kept beside the swap", tc.name, r.Memory.Limit, tc.memory)
		}
		hasShares := r.CPU != nil && r.CPU.Shares != nil
		if hasShares == tc.wantSharesAbsent || (hasShares && *r.CPU.Shares != tc.wantShares) {
			t.Errorf("%s: cpu %+v, want shares %d (absent %t)", tc.name, r.CPU, tc.wantShares, tc.wantSharesAbsent)
		}
	}
}

// TestScrapeEndpointFailureIsLogged: a metrics endpoint that stops
// serving for any reason but a shutdown says so in the log.
func TestScrapeEndpointFailureIsLogged(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MetricsListen = "127.0.0.1:0"
	var logs testenv.SyncBuffer
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs})
	k, err := newOpsKit(cfg, "v", "r", log)
	if err != nil {
		t.Fatal(err)
	}
	defer k.close(context.Background())
	k.serveScrape(log)
	_ = k.scrapeLn.Close() // the endpoint's listener fails under it
	deadline := time.Now().Add(testenv.Patience)
	for !strings.Contains(logs.String(), "[ERROR] metrics endpoint failed") {
		if time.Now().After(deadline) {
			t.Fatalf("no error logged for a failed metrics endpoint:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNodeTransportBounds: a router's connections to nodes bound a TLS
// handshake at 10 s, keep idle connections 90 s for the warm path, and
// accept TLS 1.2 at least.
func TestNodeTransportBounds(t *testing.T) {
	rt, err := nodeTransport(&FleetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if rt.TLSHandshakeTimeout != 10*time.Second || rt.IdleConnTimeout != 90*time.Second || rt.TLSClientConfig.MinVersion != tls.VersionTLS12 {
		t.Errorf("handshake %v, idle %v, min TLS %#x; want 10s, 1m30s, TLS 1.2", rt.TLSHandshakeTimeout, rt.IdleConnTimeout, rt.TLSClientConfig.MinVersion)
	}
}
