//go:build unix

package api_test

import (
	"context"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
)

// BenchmarkAPIExecWarm measures one `x=1` cell through the typed client
// over the Unix socket on a warm kernel: the API's overhead is this minus
// pool's BenchmarkPoolExecWarm.
func BenchmarkAPIExecWarm(b *testing.B) {
	d := startDaemon(b, daemonOpts{})
	ctx := context.Background()
	req := pool.Request{Owner: "bench", Code: "x=1"}
	if _, err := d.client.Execute(ctx, req); err != nil {
		b.Fatal(err)
	}
	report := testenv.MeasureCPU(b, 0)
	b.ResetTimer()
	for b.Loop() {
		res, err := d.client.Execute(ctx, req)
		if err != nil || res.Status != pool.StatusSuccess {
			b.Fatalf("%+v, %v", res, err)
		}
	}
	b.StopTimer()
	report()
}
