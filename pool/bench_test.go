package pool

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// BenchmarkPoolExecWarm is `x=1` through Execute on a warm kernel: the
// pool's overhead over kernel.Exec (validation, registry, result assembly).
func BenchmarkPoolExecWarm(b *testing.B) {
	p := newTestPool(b)
	req := Request{Owner: "bench", Code: "x=1"}
	if res := run(b, p, req); res.Status != StatusSuccess {
		b.Fatalf("warm-up: %+v", res)
	}
	b.ReportAllocs()
	report := testenv.MeasureCPU(b, 0)
	for b.Loop() {
		res, err := p.Execute(b.Context(), req)
		if err != nil || res.Status != StatusSuccess {
			b.Fatalf("Execute: %v %+v", err, res)
		}
	}
	b.StopTimer()
	report()
}

// BenchmarkPoolExecWarmParallel runs `x=1` on one warm kernel per
// goroutine, measuring registry contention.
func BenchmarkPoolExecWarmParallel(b *testing.B) {
	p := newTestPool(b)
	// RunParallel runs GOMAXPROCS goroutines (parallelism 1): warm one
	// kernel per goroutine before the timer starts.
	n := runtime.GOMAXPROCS(0)
	for i := range n {
		if res := run(b, p, Request{Owner: fmt.Sprintf("bench-%d", i), Code: "x=1"}); res.Status != StatusSuccess {
			b.Fatalf("warm-up: %+v", res)
		}
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req := Request{Owner: fmt.Sprintf("bench-%d", (next.Add(1)-1)%int64(n)), Code: "x=1"}
		for pb.Next() {
			res, err := p.Execute(b.Context(), req)
			if err != nil || res.Status != StatusSuccess {
				b.Errorf("Execute: %v %+v", err, res)
				return
			}
		}
	})
	b.StopTimer()
	if st := p.Stats(); st.KernelsStarted != uint64(n) {
		b.Fatalf("%d kernels started, want the %d warmed before timing (a cold start was timed)", st.KernelsStarted, n)
	}
}

// BenchmarkKernelExecWarm is the same cell through kernel.Exec directly,
// the floor BenchmarkPoolExecWarm is compared with.
func BenchmarkKernelExecWarm(b *testing.B) {
	testenv.RequirePython(b)
	k, err := kernel.Start(b.Context(), kernel.Spec{
		ID: newKernelID(), Interpreter: testenv.Python, StateDir: testTempDir(b),
		Env: minimalEnv(os.Environ(), runtime.GOOS),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = k.Kill() }()
	cell := kernel.Cell{Code: "x=1"}
	if _, err := k.Exec(b.Context(), cell); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Exec(b.Context(), cell); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegistryPath is the pool's own CPU work per call without the
// kernel round trip: validation, slot entry and exit, semaphore.
func BenchmarkRegistryPath(b *testing.B) {
	p := newTestPool(b)
	req := Request{Owner: "bench", Code: "x=1"}
	b.ReportAllocs()
	for b.Loop() {
		rq, err := p.normalize(req)
		if err != nil {
			b.Fatal(err)
		}
		s, _, err := p.enter(rq.key, rq.tools)
		if err != nil {
			b.Fatal(err)
		}
		s.sem <- struct{}{}
		<-s.sem
		p.leave(s)
	}
}
