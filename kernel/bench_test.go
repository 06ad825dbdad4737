package kernel

import (
	"context"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// BenchmarkColdStart: Start to the first reply of `x=1`, then teardown
// (outside the timer).
func BenchmarkColdStart(b *testing.B) {
	testenv.RequirePython(b)
	state := testTempDir(b)
	for i := 0; i < b.N; i++ {
		spec := Spec{ID: "kbench" + itoa(i), Interpreter: testenv.Python, StateDir: state, Env: []string{"PATH=/usr/bin:/bin"}}
		k, err := Start(context.Background(), spec)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := k.Exec(context.Background(), Cell{Code: "x=1"}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = k.Kill()
		b.StartTimer()
	}
}

func benchExec(b *testing.B, code string, setup string) {
	testenv.RequirePython(b)
	k := startKernel(b, baseSpec(b), "")
	if setup != "" {
		mustExec(b, k, setup)
	}
	ctx := context.Background()
	cell := Cell{Code: code}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := k.Exec(ctx, cell); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecWarm: one trivial cell on a live kernel.
func BenchmarkExecWarm(b *testing.B) { benchExec(b, "x=1", "") }

// BenchmarkExec1MiB: a cell printing 1 MiB (Python-level stdout).
func BenchmarkExec1MiB(b *testing.B) {
	b.SetBytes(1 << 20)
	benchExec(b, "print(s, end='')", "s = 'x' * (1 << 20)")
}
