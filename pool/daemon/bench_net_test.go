package daemon_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// BenchmarkNetworkWarmCell measures one `x=1` cell on a warm kernel
// through the Go client over the network listener (TLS on loopback,
// bearer token, kept-alive connection) and, in the same run, over the
// Unix socket: tls_ns/cell, unix_ns/cell and their ratio.
func BenchmarkNetworkWarmCell(b *testing.B) {
	cfg, ca := netConfig(b)
	n := startNetNode(b, cfg, ca)
	ctx := context.Background()
	tlsClient := n.client(b, adminToken, "")
	req := pool.Request{Owner: "bench", Code: "x=1"}
	run := func(c *api.Client, iters int) time.Duration {
		start := time.Now()
		for range iters {
			res, err := c.Execute(ctx, req)
			if err != nil || res.Status != pool.StatusSuccess {
				b.Fatalf("%+v, %v", res, err)
			}
		}
		return time.Since(start)
	}
	run(tlsClient, 10) // the kernel is warm and both connections are open
	run(n.local, 10)
	b.ResetTimer()
	var tlsTime, unixTime time.Duration
	iters := 0
	for b.Loop() {
		tlsTime += run(tlsClient, 1)
		unixTime += run(n.local, 1)
		iters++
	}
	b.StopTimer()
	b.ReportMetric(float64(tlsTime.Nanoseconds())/float64(iters), "tls_ns/cell")
	b.ReportMetric(float64(unixTime.Nanoseconds())/float64(iters), "unix_ns/cell")
	b.ReportMetric(float64(tlsTime)/float64(unixTime), "tls/unix")
}

// BenchmarkDrain100 drains a node holding 100 idle kernels of a persist
// profile, each with a variable, to the local checkpoint store: from
// POST /v1/drain to the drained status with all 100 saved (goal: 10 s
// here). One drain per iteration (run it with -benchtime=1x).
func BenchmarkDrain100(b *testing.B) {
	const kernels = 100
	for b.Loop() {
		b.StopTimer()
		cfg, ca := persistConfig(b)
		cfg.MaxKernels = kernels + 8
		cfg.Checkpoints.Idle = 0 // every kernel still to save when the drain starts, however slow the setup
		n := startNetNode(b, cfg, ca)
		ctx := context.Background()
		for i := range kernels {
			o := fmt.Sprintf("owner-%03d", i)
			if res, err := n.local.Execute(ctx, pool.Request{Owner: o, Code: fmt.Sprintf("x = %d\ny = list(range(1000))", i)}); err != nil || res.Status != pool.StatusSuccess {
				b.Fatalf("execute %s: %+v, %v", o, res, err)
			}
		}
		b.StartTimer()
		start := time.Now()
		final := make(chan *api.DrainStatus, 1)
		go func() {
			st, err := n.local.Drain(ctx, func(api.DrainStatus) {})
			if err != nil {
				b.Errorf("drain: %v", err)
			}
			final <- st
		}()
		<-n.d.DrainRequested()
		if err := n.d.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
		st := <-final
		elapsed := time.Since(start)
		b.StopTimer()
		if st == nil || st.State != api.StateDrained || st.Saved != kernels || st.Failed != 0 {
			b.Fatalf("drain: %+v", st)
		}
		b.ReportMetric(elapsed.Seconds(), "drain_s")
		b.StartTimer()
	}
}
