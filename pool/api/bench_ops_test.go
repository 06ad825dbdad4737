//go:build unix

package api_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kernpool/kernpool/audit"
	"github.com/kernpool/kernpool/metrics"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// BenchmarkAPIExecWarmOps is BenchmarkAPIExecWarm on two daemons at once:
// one bare ("off"), one with the operator kit the daemon wires ("on": the
// Prometheus observer, the audit log on a real file, GET /metrics on the
// server). Each iteration runs one cell on each, alternating, so that
// the noise of a shared machine hits both alike; it reports both
// latencies and on/off, whose excess over 1 is the kit's overhead.
func BenchmarkAPIExecWarmOps(b *testing.B) {
	off := startDaemon(b, daemonOpts{})
	m := metrics.New("bench", "none", []string{"default"})
	a, err := audit.Open(audit.Config{Path: filepath.Join(b.TempDir(), "audit.log"), OnFailure: m.AuditWriteFailed})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })
	kit := daemonOpts{
		pool:   func(c *pool.Config) { c.Observer = pool.Observers(m, a) },
		server: func(c *api.ServerConfig) { c.Metrics = m.Handler() },
	}
	if os.Getenv("KERNPOOL_BENCH_AA") != "" {
		kit = daemonOpts{} // A/A run: how far apart two bare daemons measure
	}
	on := startDaemon(b, kit)
	ctx := context.Background()
	req := pool.Request{Owner: "bench", Code: "x=1"}
	cell := func(d *daemon) time.Duration {
		start := time.Now()
		res, err := d.client.Execute(ctx, req)
		if err != nil || res.Status != pool.StatusSuccess {
			b.Fatalf("%+v, %v", res, err)
		}
		return time.Since(start)
	}
	cell(off)
	cell(on)
	var tOff, tOn time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			tOff += cell(off)
			tOn += cell(on)
		} else {
			tOn += cell(on)
			tOff += cell(off)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tOff.Nanoseconds())/n, "off-ns/cell")
	b.ReportMetric(float64(tOn.Nanoseconds())/n, "on-ns/cell")
	b.ReportMetric(float64(tOn)/float64(tOff), "on/off")
}

// BenchmarkOpsKitPerCell is the operator kit's own cost per cell (the
// metrics observer and the audit line of one settled cell, GET /metrics
// excluded), measured alone so that it can be set against the ~300 µs of
// BenchmarkAPIExecWarm, which the shared machine's noise (±20 % between
// two identical daemons) cannot resolve to 5 %.
func BenchmarkOpsKitPerCell(b *testing.B) {
	m := metrics.New("bench", "none", []string{"default"})
	a, err := audit.Open(audit.Config{Path: filepath.Join(b.TempDir(), "audit.log"), OnFailure: m.AuditWriteFailed})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	obs := pool.Observers(m, a)
	ev := &pool.CellEvent{Time: time.Now(), Owner: "bench", KernelID: "k0123456789abcdef", UID: 60001, Mode: "default",
		Code: "x=1", Status: pool.StatusSuccess, Duration: 300 * time.Microsecond, OutputBytes: 2, ReplyBytes: 2}
	for b.Loop() {
		obs.CellDone(ev)
	}
}
