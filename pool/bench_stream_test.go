package pool_test

import (
	"testing"

	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/pool"
)

// bench1MiB runs a cell printing 1 MiB of text lines through the pool
// with the real output pipeline (redaction, caps, spill), streamed or not.
func bench1MiB(b *testing.B, stream bool) {
	p := newTestPool(b, func(c *pool.Config) { c.Output = envscrub.NewPipeline(envscrub.OutputConfig{}) })
	run(b, p, pool.Request{Code: "s = ('hello world %d\\n' * 64000)[:1 << 20]"})
	req := pool.Request{Code: "print(s, end='')"}
	if stream {
		req.Stream = func(pool.Event) {}
	}
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for b.Loop() {
		if res, err := p.Execute(b.Context(), req); err != nil || res.Status != pool.StatusSuccess {
			b.Fatalf("%+v, %v", res, err)
		}
	}
}

// BenchmarkPool1MiB and BenchmarkPool1MiBStreamed: streaming should add at
// most 10 % over the same cell unstreamed.
func BenchmarkPool1MiB(b *testing.B)         { bench1MiB(b, false) }
func BenchmarkPool1MiBStreamed(b *testing.B) { bench1MiB(b, true) }
