//go:build !windows

package kernel

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// endsOn is a context that ends, with err, when its channel closes: the
// tests end a listing's context once its repr is known to run.
type endsOn struct {
	context.Context
	done <-chan struct{}
	err  error
}

func (c *endsOn) Done() <-chan struct{} { return c.done }

func (c *endsOn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// reprRuns makes a FIFO a repr writes to once it runs; the channel closes
// when that write arrived.
func reprRuns(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	path := filepath.Join(testTempDir(t), "repr-runs")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{})
	go func() {
		if f, err := os.Open(path); err == nil { // blocks until the repr opens it
			_, _ = io.ReadAll(f)
			_ = f.Close()
		}
		close(ran)
	}()
	t.Cleanup(func() {
		// A repr that never ran leaves the reader blocked in its open.
		if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
			_ = f.Close()
		}
		<-ran
	})
	return path, ran
}

// A repr that loops is interrupted at the listing's deadline or cancel,
// like a cell: the kernel keeps its state, its counter does not move, the
// next cell and a later listing work, and nothing the repr printed shows.
// One that catches the first KeyboardInterrupt is stopped by the repeat;
// one that ignores SIGINT outlives the grace and is killed with the kernel.
func TestVariablesInterruptALoopingRepr(t *testing.T) {
	const loop = "        print('noise'); print('noise', file=sys.stderr); os.write(1, b'fd-noise\\n')\n" +
		"        with open(%q, 'w') as f:\n            f.write('x')\n"
	cases := []struct {
		name   string
		body   string // after the repr signalled it runs
		err    error  // the context's error
		want   error
		killed bool
	}{
		{"deadline", "        while True:\n            pass\n", context.DeadlineExceeded, ErrTimeout, false},
		{"cancel catching one", "        try:\n            while True:\n                pass\n        except BaseException:\n            while True:\n                pass\n",
			context.Canceled, ErrCanceled, false},
		{"deadline ignoring SIGINT", "        while True:\n            pass\n", context.DeadlineExceeded, ErrTimeout, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requireProc(t)
			k := startKernel(t, baseSpec(t), "")
			fifo, ran := reprRuns(t)
			pre := ""
			if c.killed {
				pre = "        signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
			}
			mustExec(t, k, "import os, signal, sys\nx = 41\nclass Bad:\n    def __repr__(self):\n"+pre+
				strings.Replace(loop, "%q", pyStr(fifo), 1)+c.body+"bad = Bad()")
			_, err := k.Variables(&endsOn{Context: context.Background(), done: ran, err: c.err})
			if !errors.Is(err, c.want) {
				t.Fatalf("listing: %v, want %v", err, c.want)
			}
			if c.killed {
				<-k.Done()
				if !strings.Contains(err.Error(), "kernel was killed") {
					t.Fatalf("listing: %v; want it to say the kernel was killed", err)
				}
				return
			}
			if !strings.Contains(err.Error(), "interrupted") || !strings.Contains(err.Error(), "keeps its state") {
				t.Fatalf("listing: %v; want it to say it was interrupted and the kernel kept its state", err)
			}
			// The interrupt's late repeats land between requests: the
			// runner takes them as it does between cells.
			for range 20 {
				if err := syscall.Kill(k.Pid(), syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
			}
			testenv.WaitFor(t, "the SIGINTs to reach the runner", func() bool { return !sigintPending(t, k.Pid()) })
			rep := mustExec(t, k, "del bad, Bad\nx += 1\nclass Loud:\n    def __repr__(self):\n"+
				"        print('noise'); os.write(2, b'fd-noise\\n')\n        return 'loud'\nloud = Loud()\ndel Loud\nx")
			if rep.Stdout != "42\n" || rep.Stderr != "" || rep.ExecutionCount != 2 {
				t.Fatalf("next cell: stdout %q stderr %q count %d; want 42, nothing, 2", rep.Stdout, rep.Stderr, rep.ExecutionCount)
			}
			v, err := k.Variables(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, e := range v.Variables {
				got[e.Name] = e.Repr
			}
			if v.Total != 5 || len(got) != 5 || got["x"] != "42" || got["loud"] != "loud" {
				t.Fatalf("second listing %v of %d; want loud, os, signal, sys and x", got, v.Total)
			}
			if rep := mustExec(t, k, "x"); rep.Stdout != "42\n" || rep.Stderr != "" || rep.ExecutionCount != 3 {
				t.Fatalf("cell after the listings: stdout %q stderr %q count %d; want 42, nothing, 3", rep.Stdout, rep.Stderr, rep.ExecutionCount)
			}
		})
	}
}
