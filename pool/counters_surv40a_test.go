//go:build unix

package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// outcomeStats is the part of PoolStats a cell's outcome moves: the
// counters ops read (GET /v1/health's stats).
func outcomeStats(st PoolStats) PoolStats {
	return PoolStats{Cells: st.Cells, Timeouts: st.Timeouts, Interrupted: st.Interrupted,
		Died: st.Died, Killed: st.Killed, Ended: st.Ended}
}

// fdLoop is a cell that writes fd-level output (which outlives a kill of
// the kernel), says it started, and then spins: with SIGINT ignored only a
// kill ends it.
func fdLoop(started string) string {
	return fmt.Sprintf("import os\nos.write(1, b'before the kill\\n')\nopen(%q, 'w').close()\nwhile True: pass", started)
}

// runCanceled runs code and cancels its caller once the cell wrote started.
func runCanceled(t *testing.T, p *Pool, code, started string) *Result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan outcome, 1)
	go func() {
		res, err := p.Execute(ctx, Request{Code: code})
		done <- outcome{res, err}
	}()
	waitFor(t, "the cell to run", func() bool { _, err := os.Stat(started); return err == nil })
	cancel()
	o := <-done
	if o.err != nil {
		t.Fatalf("canceled cell: %v", o.err)
	}
	return o.res
}

// Each way a cell can end counts once, in the counter docs say it does
// (Interrupted: a caller gone or a kill; Timeouts: its timeout; Cells:
// every cell that reached a kernel), whether the kernel lives on or not.
// The cell is the kernel's second: the client sees execution count 2 even
// when the kill left no reply (or one with fd-level output only), and the
// next cell counts on (3) or starts a fresh kernel (1).
func TestCellOutcomeCounters(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration // the interrupt grace; 0: newTestPool's generous one
		drive func(t *testing.T, p *Pool, id, dir string) *Result
		want  PoolStats
		kept  bool // the kernel lives on with its state
	}{
		{"interrupt within grace", 0, func(t *testing.T, p *Pool, id, _ string) *Result {
			b := startBlocker(t, p, t.Context(), Request{})
			if err := p.Interrupt(id); err != nil {
				t.Fatal(err)
			}
			return b.wait(t)
		}, PoolStats{Cells: 2, Interrupted: 1}, true},
		{"timeout within grace", 0, func(t *testing.T, p *Pool, _, _ string) *Result {
			return run(t, p, Request{Code: "import time\ntime.sleep(300)", Timeout: time.Second})
		}, PoolStats{Cells: 2, Timeouts: 1}, true},
		{"killed by Kill", 0, func(t *testing.T, p *Pool, id, _ string) *Result {
			b := startBlocker(t, p, t.Context(), Request{})
			if err := p.Kill(id); err != nil {
				t.Fatal(err)
			}
			return b.wait(t)
		}, PoolStats{Cells: 2, Interrupted: 1, Killed: 1}, false},
		{"caller gone past grace", 100 * time.Millisecond, func(t *testing.T, p *Pool, _, dir string) *Result {
			started := filepath.Join(dir, "started")
			return runCanceled(t, p, fdLoop(started), started)
		}, PoolStats{Cells: 2, Interrupted: 1}, false},
		{"timeout past grace", 100 * time.Millisecond, func(t *testing.T, p *Pool, _, dir string) *Result {
			return run(t, p, Request{Code: fdLoop(filepath.Join(dir, "started")), Timeout: time.Second})
		}, PoolStats{Cells: 2, Timeouts: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPool(t, func(c *Config) {
				if tc.grace > 0 {
					c.Policies = map[string]CellPolicy{defaultName: {InterruptGrace: tc.grace}}
				}
			})
			// A handler a cell installs stays: the past-grace cells ignore
			// SIGINT from their first line on.
			warm := Request{Code: "x = 1"}
			if tc.grace > 0 {
				warm.Code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)"
			}
			first := run(t, p, warm)
			wantStatus(t, first, StatusSuccess)
			res := tc.drive(t, p, first.Kernel.ID, testTempDir(t))
			if res.Kernel.StatePreserved != tc.kept || res.Kernel.ExecutionCount != 2 {
				t.Fatalf("second cell: %+v; want execution count 2, state kept %v", res, tc.kept)
			}
			if got := outcomeStats(p.Stats()); got != tc.want {
				t.Fatalf("stats after the cell: %+v; want %+v", got, tc.want)
			}
			next := run(t, p, Request{Code: "pass"})
			wantCount := map[bool]int{true: 3, false: 1}[tc.kept]
			if next.Kernel.ExecutionCount != wantCount || (next.Kernel.ID == first.Kernel.ID) != tc.kept {
				t.Fatalf("next cell: %+v; want execution count %d, same kernel %v", next.Kernel, wantCount, tc.kept)
			}
			if cells := p.Stats().Cells; cells != 3 {
				t.Fatalf("cells after the next cell: %d; want 3", cells)
			}
		})
	}
}

// A listing whose caller goes away while a repr ignores SIGINT outlives
// its grace and is killed with the kernel: counted once as Interrupted
// (a caller gone, as for a cell), the kernel's end "interrupt", and no
// cell counted. The error names neither a timeout nor an explicit
// interrupt: the caller that went away reads no answer.
func TestVariablesCallerGoneKillCounts(t *testing.T) {
	rec := newRecorder()
	p := newTestPool(t, func(c *Config) {
		c.Observer = rec
		c.Policies = map[string]CellPolicy{defaultName: {InterruptGrace: 100 * time.Millisecond}}
	})
	runs := filepath.Join(testTempDir(t), "repr-runs")
	warm := run(t, p, Request{Code: fmt.Sprintf("import signal\nclass A:\n def __repr__(self):\n"+
		"  signal.signal(signal.SIGINT, signal.SIG_IGN)\n  open(%q, 'w').close()\n  while True: pass\na = A()", runs)})
	id, pid := warm.Kernel.ID, pidOf(t, p, warm.Kernel.ID)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := p.Variables(ctx, id)
		errc <- err
	}()
	waitFor(t, "the listing's repr to run", func() bool { _, err := os.Stat(runs); return err == nil })
	cancel()
	var err error
	select {
	case err = <-errc:
	case <-time.After(testenv.Patience):
		t.Fatal("hang: the canceled listing did not return")
	}
	if err == nil || errors.Is(err, ErrInterrupted) || errors.Is(err, ErrTimeout) {
		t.Fatalf("listing whose caller went away: %v; want an error that is neither ErrInterrupted nor ErrTimeout", err)
	}
	if got, want := outcomeStats(p.Stats()), (PoolStats{Cells: 1, Interrupted: 1}); got != want {
		t.Fatalf("stats after the listing: %+v; want %+v", got, want)
	}
	if ends, want := rec.Ends(), map[EndReason]int{EndInterrupt: 1}; !maps.Equal(ends, want) {
		t.Fatalf("kernels ended after the listing: %v; want %v", ends, want)
	}
	assertDead(t, pid)
}
