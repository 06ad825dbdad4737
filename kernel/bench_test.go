package kernel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
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

// benchExec times code on a live kernel; check validates every reply
// (nil: only that the cell succeeded).
func benchExec(b *testing.B, code string, setup string, check func(*Reply) error) {
	testenv.RequirePython(b)
	spec := baseSpec(b)
	spec.StdoutCap = 2 << 20 // as the pool's kernels keep spill_cap (5 MB by default)
	k := startKernel(b, spec, "")
	// The first cell waits for the runner's start-up (tens of ms): timed,
	// it would be spread over every cell of a short run.
	mustExec(b, k, cmp.Or(setup, "pass"))
	ctx := context.Background()
	cell := Cell{Code: code}
	report := testenv.MeasureCPU(b, k.Pid())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := k.Exec(ctx, cell)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Status != "ok" {
			b.Fatalf("cell status %q: %s", rep.Status, rep.Traceback)
		}
		if check != nil {
			if err := check(rep); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	report()
}

// BenchmarkExecWarm: one trivial cell on a live kernel.
func BenchmarkExecWarm(b *testing.B) { benchExec(b, "x=1", "", nil) }

// BenchmarkExec1MiB: a cell printing 1 MiB (Python-level stdout), every
// byte of which must come back: 2^19 two-byte characters (é), so that
// the runner's escaping and the decoder's UTF-8 handling both work.
func BenchmarkExec1MiB(b *testing.B) {
	b.SetBytes(1 << 20)
	benchExec(b, "print(s, end='')", "s = '\u00e9' * (1 << 19)", func(rep *Reply) error {
		if len(rep.Stdout) != 1<<20 || rep.StdoutClipped || !strings.HasPrefix(rep.Stdout, "é") || !strings.HasSuffix(rep.Stdout, "é") {
			return fmt.Errorf("reply stdout: %d bytes (clipped %v), want 1 MiB of é", len(rep.Stdout), rep.StdoutClipped)
		}
		return nil
	})
}

// BenchmarkDecodeFrame1MiB: the streaming frame decoder on a 1 MiB stdout
// with an escape every 13 bytes (the dense case), through a scanner's body
// reader as on the kernel's pipe.
func BenchmarkDecodeFrame1MiB(b *testing.B) {
	body := `{"id":"1","status":"ok","stdout":"` + strings.Repeat(`hello world\n`, 1<<16) +
		`","stderr":"","traceback":"","exit_code":0,"execution_count":1}`
	in := "\n@@S@@ " + itoa(len(body)) + "\n" + body
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var epoch atomic.Uint64
		s := newScanner(strings.NewReader(in), []byte("\n@@S@@ "), " ", &epoch)
		err := s.run(func([]byte, uint64) {}, func(_ byte, n int64) error {
			_, err := decodeFrame(s.body(n), &budget{limit: 1 << 30}, defaultFrameCaps)
			return err
		})
		if !errors.Is(err, io.EOF) {
			b.Fatal(err)
		}
	}
}
