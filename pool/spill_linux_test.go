package pool_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
)

// spillLine is line i of the cells below: numbered, so that any cut,
// reordering or loss shows.
func spillLines(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "line %07d %s\n", i, strings.Repeat("x", 80))
	}
	return b.String()
}

const spillLinesCode = "import sys\nfor i in range(%d, %d):\n    sys.stdout.write('line %%07d %%s\\n' %% (i, 'x' * 80))\n"

// A 6 MB stdout under a spill cap that holds it spills whole, byte for
// byte; the inline tail is its real end.
func TestSpillHoldsTheWholeOutput(t *testing.T) {
	testenv.RequirePython(t)
	p := newTestPool(t, func(c *pool.Config) {
		c.Output = envscrub.NewPipeline(envscrub.OutputConfig{SpillCap: 8_000_000})
	})
	const n = 64_000 // 94 bytes a line: 6,016,000 bytes
	want := spillLines(0, n)
	res := run(t, p, pool.Request{Code: fmt.Sprintf(spillLinesCode, 0, n)})
	wantStatus(t, res, pool.StatusSuccess)
	data, err := os.ReadFile(res.StdoutSpillPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 6_016_000 || string(data) != want || res.StdoutBytesTotal != 6_016_000 {
		t.Fatalf("spill holds %d bytes (result says %d), want all %d", len(data), res.StdoutBytesTotal, len(want))
	}
	if !strings.HasSuffix(res.Output, spillLines(n-100, n)) || !strings.HasSuffix(res.Stdout, spillLines(n-100, n)) {
		t.Fatalf("inline tail %q is not the output's end", res.Output[len(res.Output)-200:])
	}
	if !strings.Contains(res.Warning, "FULL output") {
		t.Fatalf("warning %q", res.Warning)
	}
}

// The default spill cap is reached: a longer output, fd-level and
// Python-level, spills exactly 5,000,000 bytes: its head, a notice and its
// end; the inline tail is the real end too.
func TestDefaultSpillCapReached(t *testing.T) {
	testenv.RequirePython(t)
	p := newTestPool(t, func(c *pool.Config) { c.Output = envscrub.NewPipeline(envscrub.OutputConfig{}) })
	for _, tc := range []struct{ name, code string }{
		{"Python-level", fmt.Sprintf(spillLinesCode, 0, 70_000)},
		{"fd-level", "import os\nos.write(1, b''.join(b'line %07d ' % i + b'x' * 80 + b'\\n' for i in range(70_000)))\nNone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, p, pool.Request{Owner: tc.name, Code: tc.code})
			wantStatus(t, res, pool.StatusSuccess)
			data, err := os.ReadFile(res.StdoutSpillPath)
			if err != nil {
				t.Fatal(err)
			}
			end := spillLines(70_000-100, 70_000)
			if len(data) != envscrub.DefaultSpillCap || !strings.HasPrefix(string(data), spillLines(0, 1000)) ||
				!strings.HasSuffix(string(data), end) || !strings.Contains(string(data), " of 6,580,000 bytes omitted ...]") {
				t.Fatalf("spill holds %d bytes, want %d with the head, a notice and the end", len(data), envscrub.DefaultSpillCap)
			}
			if res.StdoutBytesTotal != 6_580_000 || !strings.HasSuffix(res.Output, end) {
				t.Fatalf("total %d, inline tail %q", res.StdoutBytesTotal, res.Output[len(res.Output)-200:])
			}
		})
	}
}
