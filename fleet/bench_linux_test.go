package fleet_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// BenchmarkRouterWarmCell measures one `x=1` cell on a warm kernel
// through a router and, in the same run, straight to the node (both
// over loopback HTTP with a bearer token, kept-alive connections):
// router_ns/cell, direct_ns/cell and overhead_ns/cell, the router's
// cost per cell (its Redis read of the owner's record, the second
// hop). Goal: overhead at most 100 µs.
func BenchmarkRouterWarmCell(b *testing.B) {
	f := newFleet(b)
	n := f.node("a")
	f.waitNodes(1)
	reads := &countingRegistry{Registry: f.reg}
	viaRouter := client(b, f.routerWith(reads), adminToken)
	direct := client(b, n.url, adminToken)
	ctx := context.Background()
	req := pool.Request{Owner: "bench", Code: "x=1"}
	run := func(c *api.Client) time.Duration {
		start := time.Now()
		res, err := c.Execute(ctx, req)
		if err != nil || res.Status != pool.StatusSuccess {
			b.Fatalf("%+v, %v", res, err)
		}
		return time.Since(start)
	}
	for range 20 { // the kernel is warm, the record placed, connections open
		run(viaRouter)
		run(direct)
	}
	var routed, straight time.Duration
	iters := 0
	reads.onPath.Store(0)
	for b.Loop() {
		routed += run(viaRouter)
		straight += run(direct)
		iters++
	}
	b.ReportMetric(float64(routed.Nanoseconds())/float64(iters), "router_ns/cell")
	b.ReportMetric(float64(straight.Nanoseconds())/float64(iters), "direct_ns/cell")
	b.ReportMetric(float64((routed-straight).Nanoseconds())/float64(iters), "overhead_ns/cell")
	// On the request path: the node list is reread in the background.
	b.ReportMetric(float64(reads.onPath.Load())/float64(iters), "redis_reads/cell")
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
