package pool

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// BenchmarkFirstCell is the first cell of a new owner through Execute,
// end to end (claim or spawn, bind, cell, result), from a warm spare
// against a cold start, in one run so the ratios hold on a loaded host.
// Between iterations (timer stopped) the owner is shut down and the
// benchmark waits until the refill has the spare count back, so every
// spare iteration claims a ready spare and no refill runs during a cell.
//
//	go test -run '^$' -bench BenchmarkFirstCell ./pool/
func BenchmarkFirstCell(b *testing.B) {
	const light = "import json, decimal, email\nx = 1"
	const pandas = "import pandas as pd; pd.DataFrame({\"a\": [1]})"
	preload := []string{"json", "decimal", "email"}
	cases := []struct {
		name string
		warm Warm
		code string
		need string // a module the case needs ("" none)
	}{
		{"bare/warm-kernel", Warm{}, "x = 1", ""}, // a reused kernel's cell: the floor
		{"bare/cold", Warm{}, "x = 1", ""},
		{"bare/spare", Warm{Spares: 1}, "x = 1", ""},
		{"imports/cold", Warm{}, light, ""},
		{"imports/spare-preload", Warm{Spares: 1, Preload: preload}, light, ""},
		{"pandas/cold", Warm{}, pandas, "pandas"},
		{"pandas/spare-preload", Warm{Spares: 1, Preload: []string{"pandas"}}, pandas, "pandas"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if c.need != "" {
				if err := exec.Command(testenv.Python, "-c", "import "+c.need).Run(); err != nil {
					b.Skipf("needs python3 module %s (Debian: python3-%s): %v", c.need, c.need, err)
				}
			}
			p := newTestPool(b, withWarm(map[string]Warm{"default": c.warm}))
			ctx := context.Background()
			wait := func() {
				if c.warm.Spares > 0 {
					if err := p.WaitSpares(ctx, "default", c.warm.Spares); err != nil {
						b.Fatal(err)
					}
				}
			}
			wait()
			var took []time.Duration
			if c.name == "bare/warm-kernel" {
				run(b, p, Request{Code: "x = 0"})
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					if res, err := p.Execute(ctx, Request{Code: c.code}); err != nil || !res.Kernel.Reused {
						b.Fatalf("Execute: %v %+v", err, res)
					}
					took = append(took, time.Since(t0))
				}
				reportMedian(b, took)
				return
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				owner := fmt.Sprintf("o%d", i)
				t0 := time.Now()
				res, err := p.Execute(ctx, Request{Owner: owner, Code: c.code})
				took = append(took, time.Since(t0))
				if err != nil || res.Status != StatusSuccess || res.Kernel.Reused {
					b.Fatalf("Execute: %v %+v", err, res)
				}
				b.StopTimer()
				p.ShutdownOwner(owner)
				wait()
				b.StartTimer()
			}
			b.StopTimer()
			reportMedian(b, took)
			if st := p.Stats(); c.warm.Spares > 0 && st.SparesClaimed != uint64(b.N) {
				b.Fatalf("%d of %d first cells ran on a spare", st.SparesClaimed, b.N)
			}
		})
	}
}

// reportMedian adds the median iteration as p50-ns/op: on a host loaded
// by others the mean carries the scheduler's outliers.
func reportMedian(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns/op")
}
