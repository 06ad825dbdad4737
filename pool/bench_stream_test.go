package pool

import (
	"testing"

	"github.com/kernpool/kernpool/envscrub"
)

// envscrubFactory adapts the real output pipeline (as pool/daemon does).
type envscrubFactory struct{ p *envscrub.Pipeline }

func (f envscrubFactory) ForKernel(secrets []string) OutputFilter {
	return envscrubFilter{f.p.ForKernel(secrets)}
}

type envscrubFilter struct{ *envscrub.Filter }

func (o envscrubFilter) Finish(stdout, stderr, spillDir string, cell int) (CellOutput, error) {
	out, err := o.Filter.Finish(stdout, stderr, spillDir, cell)
	return CellOutput(out), err
}

// bench1MiB runs a cell printing 1 MiB of text lines through the pool
// with the real output pipeline (redaction, caps, spill), streamed or not.
func bench1MiB(b *testing.B, stream bool) {
	p := newTestPool(b, func(c *Config) { c.Output = envscrubFactory{envscrub.NewPipeline(envscrub.OutputConfig{})} })
	run(b, p, Request{Code: "s = ('hello world %d\\n' * 64000)[:1 << 20]"})
	req := Request{Code: "print(s, end='')"}
	if stream {
		req.Stream = func(Event) {}
	}
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for b.Loop() {
		if res, err := p.Execute(b.Context(), req); err != nil || res.Status != StatusSuccess {
			b.Fatalf("%+v, %v", res, err)
		}
	}
}

// BenchmarkPool1MiB and BenchmarkPool1MiBStreamed: streaming should add at
// most 10 % over the same cell unstreamed.
func BenchmarkPool1MiB(b *testing.B)         { bench1MiB(b, false) }
func BenchmarkPool1MiBStreamed(b *testing.B) { bench1MiB(b, true) }
