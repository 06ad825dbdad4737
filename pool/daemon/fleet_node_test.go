//go:build unix

package daemon_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/fleet/redisreg"
	"github.com/kernpool/kernpool/internal/redistest"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
)

// TestFleetNodeRegistration: a node with fleet_redis publishes itself
// once its listener serves (name, advertise_url, max_kernels and its free
// slots), publishes the drain as soon as Shutdown begins it (with its
// free slots then, a cell still running), and withdraws itself. The heartbeat is an hour: every publication the
// test sees is the start's, the drain's or the withdrawal's own.
func TestFleetNodeRegistration(t *testing.T) {
	rd := redistest.Start(t)
	cfg, ca := netConfig(t)
	cfg.MaxKernels = 5
	cfg.Fleet.Redis, cfg.Fleet.NodeName, cfg.Fleet.AdvertiseURL = rd.URL, "n1", "https://127.0.0.1:8443"
	cfg.Fleet.Heartbeat = time.Hour
	p := cfg.Profiles["default"]
	p.Spares = 0 // free slots count only the cell's kernel
	cfg.Profiles["default"] = p
	ctx := context.Background()
	reg, err := redisreg.Open(ctx, rd.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	n := startNetNode(t, cfg, ca)
	want := fleet.Node{Name: "n1", URL: "https://127.0.0.1:8443", Max: 5, Free: 5}
	waitNode(t, reg, func(got *fleet.Node) bool {
		if got != nil && got.Draining { // told at its first registration
			t.Fatalf("the ready node published itself as draining: %+v", *got)
		}
		return got != nil && *got == want
	}, "the node registered with 5 of 5 free")

	// A cell of alice holds Shutdown's pool close open (its tool call
	// waits) while the test reads what the drain published.
	called, release := make(chan struct{}), make(chan struct{})
	gate := pool.ToolHandlerFunc(func(ctx context.Context, _ pool.ToolCall) (string, error) {
		close(called)
		<-release
		return "", nil
	})
	cell := make(chan error, 1)
	go func() {
		_, err := n.local.ExecuteStream(ctx, pool.Request{Owner: "alice", Tools: []string{"gate"},
			Code: "import kernpool_tools as t\nt.gate()"}, gate)
		cell <- err
	}()
	<-called
	n.d.Drain()
	shut := make(chan error, 1)
	go func() { shut <- n.d.Shutdown(ctx) }()
	want.Draining, want.Free = true, 4
	waitNode(t, reg, func(got *fleet.Node) bool { return got != nil && *got == want }, "the drain published with 4 of 5 free")
	close(release)
	if err := <-cell; err != nil {
		t.Errorf("alice's cell: %v", err)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	// Withdrawn by Shutdown itself, not left to expire.
	nodes, err := reg.Nodes(ctx)
	if err != nil || len(nodes) != 0 {
		t.Errorf("registrations after Shutdown: %+v, %v; want none", nodes, err)
	}
}

// waitNode waits until node n1's registration (nil: none) satisfies ok.
func waitNode(t *testing.T, reg *redisreg.Registry, ok func(*fleet.Node) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(testenv.Patience)
	for {
		nodes, err := reg.Nodes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got *fleet.Node
		for i := range nodes {
			if nodes[i].Name == "n1" {
				got = &nodes[i]
			}
		}
		if ok(got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: the registry has %+v", what, nodes)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFleetNodeNameDefaultsToHostname: without node_name a node
// registers under the host's name.
func TestFleetNodeNameDefaultsToHostname(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || (fleet.Node{Name: host, URL: "https://127.0.0.1:8443"}).Validate() != nil {
		t.Skipf("the host name %q (%v) is no node name", host, err)
	}
	rd := redistest.Start(t)
	cfg, ca := netConfig(t)
	cfg.Fleet.Redis, cfg.Fleet.AdvertiseURL = rd.URL, "https://127.0.0.1:8443"
	ctx := context.Background()
	reg, err := redisreg.Open(ctx, rd.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	startNetNode(t, cfg, ca)
	deadline := time.Now().Add(testenv.Patience)
	for {
		nodes, err := reg.Nodes(ctx)
		if err == nil && len(nodes) == 1 && nodes[0].Name == host {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("registrations %+v, %v; want one named %q", nodes, err, host)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
