//go:build unix

package api_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
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
// the noise of a shared machine hits both alike; it reports both median
// latencies and on/off, whose excess over 1 is the kit's overhead.
// KERNPOOL_BENCH_KIT=none|metrics|audit puts only that part on "on"
// (none: an A/A run measuring how far two bare daemons differ).
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
	switch os.Getenv("KERNPOOL_BENCH_KIT") {
	case "none": // A/A run: how far apart two bare daemons measure
		kit = daemonOpts{}
	case "metrics":
		kit.pool = func(c *pool.Config) { c.Observer = m }
	case "audit":
		kit = daemonOpts{pool: func(c *pool.Config) { c.Observer = a }}
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
	var tOff, tOn []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			tOff = append(tOff, cell(off))
			tOn = append(tOn, cell(on))
		} else {
			tOn = append(tOn, cell(on))
			tOff = append(tOff, cell(off))
		}
	}
	// Medians: other jobs on a shared machine stall single cells for
	// milliseconds, which would swamp a mean.
	mOff, mOn := median(tOff), median(tOn)
	b.ReportMetric(float64(mOff.Nanoseconds()), "off-median-ns")
	b.ReportMetric(float64(mOn.Nanoseconds()), "on-median-ns")
	b.ReportMetric(float64(mOn)/float64(mOff), "on/off")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkOpsKitPerCell is what the operator kit adds to a cell's own
// path (the metrics observer, and queueing the audit entry: the audit
// writer hashes, encodes and writes in the background, every 100 ms),
// measured alone to set against the ~300 µs of BenchmarkAPIExecWarm.
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
