//go:build unix

package api_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"
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

// BenchmarkToolRoundTripAPI is one tool call's round trip through the
// daemon API: the cell's stub, the rpcsock listener, the server's broker,
// a tool_call event on the streaming execute response, the client's
// ExecuteStream handler and its POST /v1/tool-calls/{id} answer, and back.
// ns/call is measured inside the cell; compare pool's
// BenchmarkToolRoundTripPool for the API's share.
func BenchmarkToolRoundTripAPI(b *testing.B) {
	d := startDaemon(b, daemonOpts{})
	ctx := context.Background()
	echo := pool.ToolHandlerFunc(func(_ context.Context, c pool.ToolCall) (string, error) {
		return string(c.Args), nil
	})
	req := pool.Request{Owner: "bench", Tools: []string{"echo"}, Timeout: 10 * time.Minute}
	warm := req
	warm.Code = toolLoopCell(1)
	if res, err := d.client.ExecuteStream(ctx, warm, echo); err != nil || res.Status != pool.StatusSuccess || res.ToolCallsMade != 2 {
		b.Fatalf("warm-up: %+v, %v", res, err)
	}
	req.Code = toolLoopCell(b.N)
	req.MaxToolCalls = b.N + 1
	b.ResetTimer()
	res, err := d.client.ExecuteStream(ctx, req, echo)
	b.StopTimer()
	if err != nil || res.Status != pool.StatusSuccess || !res.Kernel.Reused || res.ToolCallsMade != b.N+1 {
		b.Fatalf("ExecuteStream: %+v, %v", res, err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(res.Output), 10, 64)
	if err != nil {
		b.Fatalf("cell output %q is not the loop's duration: %v", res.Output, err)
	}
	b.ReportMetric(float64(ns)/float64(b.N), "ns/call")
}
