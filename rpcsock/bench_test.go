package rpcsock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"

	"github.com/kernpool/kernpool/internal/testenv"
)

// BenchmarkRoundTrip measures one tool call from the caller to the handler
// and back: a Go client on one connection (the listener's own cost), and
// the generated Python stub in a real interpreter (what a cell pays). The
// median per call is reported as median-ns/call.
func BenchmarkRoundTrip(b *testing.B) {
	handler := pool.ToolHandlerFunc(func(_ context.Context, c pool.ToolCall) (string, error) { return `{"ok":true}`, nil })
	for _, network := range []string{"unix", "tcp"} {
		b.Run("go-"+network, func(b *testing.B) {
			if network == "unix" {
				requireUnixSockets(b)
			}
			s := listen(b, Config{Tools: []string{"t"}, Network: network})
			end := s.BeginCell(handler, b.N+1)
			defer end()
			cl := newClient(b, s)
			line := req("t", map[string]string{"q": "x"}, s.Token())
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if got := cl.send(b, line); got["result"] == "" {
					b.Fatalf("got %v", got)
				}
				times = append(times, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "median-ns/call")
		})
		b.Run("python-"+network, func(b *testing.B) {
			testenv.RequirePython(b)
			if network == "unix" {
				requireUnixSockets(b)
			}
			s := listen(b, Config{Tools: []string{"t"}, Network: network})
			end := s.BeginCell(handler, b.N+1)
			defer end()
			b.ResetTimer()
			out, err := runPython(b, s, Stub([]string{"t"}), `
import time
n = int(sys.argv[4])
kernpool_tools.t(q="warm")
ts = []
for _ in range(n):
    t0 = time.perf_counter_ns()
    kernpool_tools.t(q="x")
    ts.append(time.perf_counter_ns() - t0)
ts.sort()
print(ts[len(ts)//2], sum(ts)//len(ts))
`, strconv.Itoa(b.N))
			b.StopTimer()
			if err != nil {
				b.Fatalf("python: %v\n%s", err, out)
			}
			var median, mean float64
			if _, err := fmt.Sscan(strings.TrimSpace(out), &median, &mean); err != nil {
				b.Fatalf("output %q: %v", out, err)
			}
			b.ReportMetric(median, "median-ns/call")
			b.ReportMetric(mean, "ns/op")
		})
	}
}
