package pool_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/rpcsock"
)

// toolLoopCell is a cell that makes one warm-up call (it opens the stub's
// connection), then n echo calls, and prints the loop's duration in ns
// measured inside the kernel: the cell's own start and result are not in it.
func toolLoopCell(n int) string {
	return fmt.Sprintf(`import time, kernpool_tools as _kt
_kt.echo(text="warm")
_t0 = time.perf_counter_ns()
for _ in range(%d):
    _kt.echo(text="x")
print(time.perf_counter_ns() - _t0)
`, n)
}

// reportPerCall parses the loop duration a toolLoopCell printed and
// reports it per call.
func reportPerCall(b *testing.B, output string, n int) {
	b.Helper()
	ns, err := strconv.ParseInt(strings.TrimSpace(output), 10, 64)
	if err != nil {
		b.Fatalf("cell output %q is not the loop's duration: %v", output, err)
	}
	b.ReportMetric(float64(ns)/float64(n), "ns/call")
}

// BenchmarkToolRoundTripPool is one tool call's round trip through the
// library: the cell's kernpool_tools stub, the real rpcsock listener, the
// pool's ToolHandler and back, on a warm kernel. ns/call is measured inside
// the cell; ns/op also carries the cell's own cost spread over b.N calls.
func BenchmarkToolRoundTripPool(b *testing.B) {
	p := newTestPool(b, func(c *pool.Config) { c.Tools = rpcsock.Factory{} })
	echo := pool.ToolHandlerFunc(func(_ context.Context, c pool.ToolCall) (string, error) {
		return string(c.Args), nil
	})
	req := pool.Request{Owner: "bench", Tools: []string{"echo"}, ToolHandler: echo, Timeout: 10 * time.Minute}
	warm := req
	warm.Code = toolLoopCell(1)
	if res := run(b, p, warm); res.Status != pool.StatusSuccess || res.ToolCallsMade != 2 {
		b.Fatalf("warm-up: %+v", res)
	}
	req.Code = toolLoopCell(b.N)
	req.MaxToolCalls = b.N + 1
	b.ResetTimer()
	res, err := p.Execute(b.Context(), req)
	b.StopTimer()
	if err != nil || res.Status != pool.StatusSuccess || !res.Kernel.Reused || res.ToolCallsMade != b.N+1 {
		b.Fatalf("Execute: %v %+v", err, res)
	}
	reportPerCall(b, res.Output, b.N)
}
