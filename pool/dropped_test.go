//go:build unix

package pool_test

import (
	"strconv"
	"testing"

	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/metrics"
	"github.com/kernpool/kernpool/pool"
)

// What the inline caps leave out of a result is counted in
// kernpool_dropped_bytes_total: both streams' cut bytes, summed.
func TestDroppedBytesCountBothStreams(t *testing.T) {
	m := metrics.New("test", "test", []string{"default"})
	out := envscrub.OutputConfig{InlineCap: 1000, StderrCap: 500, SpillCap: 100000}
	p := newTestPool(t, func(c *pool.Config) { c.Output = envscrub.NewPipeline(out); c.Observer = m })
	// 3001 bytes of stdout and 2001 of stderr, each over its cap.
	res := run(t, p, pool.Request{Owner: "a", Code: "import sys\nprint('o' * 3000)\nprint('e' * 2000, file=sys.stderr)"})
	wantStatus(t, res, pool.StatusSuccess)
	if !res.StdoutTruncated || !res.StderrTruncated || len(res.Stdout) > 1000+200 || len(res.Stderr) > 500+200 {
		t.Fatalf("caps: stdout truncated %v (%d bytes inline), stderr truncated %v (%d)", res.StdoutTruncated, len(res.Stdout), res.StderrTruncated, len(res.Stderr))
	}
	want := 3001 - len(res.Stdout) + 2001 - len(res.Stderr)
	if got := grepLines(scrape(m), "kernpool_dropped_bytes_total"); got != "kernpool_dropped_bytes_total "+strconv.Itoa(want) {
		t.Fatalf("metrics %q, want %d dropped (3001 stdout and 2001 stderr bytes, %d and %d inline)", got, want, len(res.Stdout), len(res.Stderr))
	}
}
