package fleet_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// BenchmarkRouterWarmCell measures one `x=1` cell on a warm kernel
// through a router and, in the same run, straight to the node and
// through a bare reverse proxy (net/http/httputil, no auth, no routing:
// the floor of any HTTP hop here), all over loopback HTTP with a bearer
// token and kept-alive connections, interleaved cell by cell:
// router_ns/cell, direct_ns/cell, overhead_ns/cell (the router's cost
// per cell: its second hop, auth, the owner's record from its cache),
// floor_overhead_ns/cell (the bare proxy's) and overhead/floor.
// Goal: overhead at most 100 µs.
func BenchmarkRouterWarmCell(b *testing.B) {
	f := newFleet(b)
	n := f.node("a")
	f.waitNodes(1)
	reads := &countingRegistry{Registry: f.reg}
	viaRouter := client(b, f.routerWith(reads), adminToken)
	direct := client(b, n.url, adminToken)
	viaProxy := client(b, bareProxy(b, n.url), adminToken)
	ctx := context.Background()
	req := pool.Request{Owner: "bench", Code: "x=1"}
	ways := []*api.Client{viaRouter, direct, viaProxy}
	run := func(c *api.Client) time.Duration {
		start := time.Now()
		res, err := c.Execute(ctx, req)
		if err != nil || res.Status != pool.StatusSuccess {
			b.Fatalf("%+v, %v", res, err)
		}
		return time.Since(start)
	}
	for range 20 { // the kernel is warm, the record placed, connections open
		for _, c := range ways {
			run(c)
		}
	}
	var total [3]time.Duration
	iters := 0
	reads.onPath.Store(0)
	for b.Loop() {
		for j := range ways { // each way goes first in turn
			k := (iters + j) % len(ways)
			total[k] += run(ways[k])
		}
		iters++
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(iters) }
	b.ReportMetric(per(total[0]), "router_ns/cell")
	b.ReportMetric(per(total[1]), "direct_ns/cell")
	b.ReportMetric(per(total[0]-total[1]), "overhead_ns/cell")
	b.ReportMetric(per(total[2]-total[1]), "floor_overhead_ns/cell")
	b.ReportMetric(float64(total[0]-total[1])/float64(max(total[2]-total[1], 1)), "overhead/floor")
	// On the request path: the node list is reread in the background.
	b.ReportMetric(float64(reads.onPath.Load())/float64(iters), "redis_reads/cell")
}

// bareProxy serves a reverse proxy to url on loopback: the benchmark's
// floor for one more HTTP hop.
func bareProxy(b *testing.B, target string) string {
	u, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	rp.Transport, rp.FlushInterval = tr, -1
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() {
		_ = srv.Close()
		tr.CloseIdleConnections()
	})
	return "http://" + ln.Addr().String()
}

// countingRegistry counts the router's registry reads, and those made
// on a request's path (under a request's context).
type countingRegistry struct {
	fleet.Registry
	onPath atomic.Int64
}

func (c *countingRegistry) count(ctx context.Context) {
	if ctx.Value(http.ServerContextKey) != nil {
		c.onPath.Add(1)
	}
}

func (c *countingRegistry) Nodes(ctx context.Context) ([]fleet.Node, error) {
	c.count(ctx)
	return c.Registry.Nodes(ctx)
}

func (c *countingRegistry) Owner(ctx context.Context, owner string) (fleet.Placement, bool, error) {
	c.count(ctx)
	return c.Registry.Owner(ctx, owner)
}
