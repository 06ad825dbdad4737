//go:build unix

package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// A listing whose repr loops is stopped by an explicit interrupt:
// ErrInterrupted (not a timeout, not a bare kernel error), and the kernel
// keeps its state, nothing counted. A repr that ignores the interrupt
// outlives its grace and is killed with the kernel: still ErrInterrupted
// (the API's 409 interrupted, as a deadline's kill stays ErrTimeout), its
// message saying the kernel was killed, and the kill counted at once as a
// cell's is (Interrupted and the end "interrupt"; for the deadline
// Timeouts and the end "timeout").
func TestVariablesInterruptedByRequest(t *testing.T) {
	for _, tc := range []struct {
		name             string
		ignore, deadline bool
		want             error
		wantStats        PoolStats // the counters the listing moves
		wantEnds         map[EndReason]int
	}{
		{"interrupt", false, false, ErrInterrupted, PoolStats{}, map[EndReason]int{}},
		{"interrupt ignoring SIGINT", true, false, ErrInterrupted, PoolStats{Interrupted: 1}, map[EndReason]int{EndInterrupt: 1}},
		{"deadline ignoring SIGINT", true, true, ErrTimeout, PoolStats{Timeouts: 1}, map[EndReason]int{EndTimeout: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			p := newTestPool(t, func(c *Config) {
				c.Observer = rec
				if tc.deadline { // the repr ignores SIGINT: any grace ends in the kill
					c.Policies = map[string]CellPolicy{defaultName: {InterruptGrace: 100 * time.Millisecond}}
				}
			})
			runs := filepath.Join(testTempDir(t), "repr-runs")
			pre := ""
			if tc.ignore {
				pre = "  signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
			}
			warm := run(t, p, Request{Code: fmt.Sprintf("import signal\nx = 41\nclass A:\n def __repr__(self):\n%s"+
				"  open(%q, 'w').close()\n  while True: pass\na = A()", pre, runs)})
			id, pid := warm.Kernel.ID, pidOf(t, p, warm.Kernel.ID)
			ctx := deadlineCtx{Context: context.Background(), done: make(chan struct{})}
			errc := make(chan error, 1)
			go func() {
				_, err := p.Variables(ctx, id)
				errc <- err
			}()
			waitFor(t, "the listing's repr to run", func() bool { _, err := os.Stat(runs); return err == nil })
			if tc.deadline {
				close(ctx.done)
			} else if err := p.Interrupt(id); err != nil {
				t.Fatalf("interrupt during the listing: %v", err)
			}
			var err error
			select {
			case err = <-errc:
			case <-time.After(testenv.Patience):
				t.Fatal("hang: the interrupted listing did not return")
			}
			other := ErrTimeout
			if tc.want == ErrTimeout {
				other = ErrInterrupted
			}
			st := p.Stats()
			if got := (PoolStats{Interrupted: st.Interrupted, Timeouts: st.Timeouts, Died: st.Died}); got != tc.wantStats {
				t.Fatalf("stats after the listing: %+v; want %+v", got, tc.wantStats)
			}
			if ends := rec.Ends(); !maps.Equal(ends, tc.wantEnds) {
				t.Fatalf("kernels ended after the listing: %v; want %v", ends, tc.wantEnds)
			}
			if tc.ignore {
				if !errors.Is(err, tc.want) || errors.Is(err, other) || !strings.Contains(err.Error(), "the kernel was killed and its state is lost") {
					t.Fatalf("listing whose repr ignored the interrupt: %v; want %v saying the kernel was killed", err, tc.want)
				}
				assertDead(t, pid)
				if live := p.Stats().KernelsLive; live != 0 {
					t.Fatalf("live kernels after the listing's kill: %d; want 0 (the killed kernel left the registry)", live)
				}
				return
			}
			if !errors.Is(err, ErrInterrupted) || errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "keeps its state") {
				t.Fatalf("interrupted listing: %v; want ErrInterrupted saying the kernel keeps its state", err)
			}
			next := run(t, p, Request{Code: "del a, A\nx += 1\nprint(x)"})
			if next.Output != "42\n" || next.Kernel.ID != id || !next.Kernel.Reused {
				t.Fatalf("after the interrupted listing: %+v; want x kept in kernel %s", next, id)
			}
		})
	}
}

// deadlineCtx is a context whose deadline passes when the test closes
// done (the event it waits for), not at a time.
type deadlineCtx struct {
	context.Context
	done chan struct{}
}

func (c deadlineCtx) Done() <-chan struct{} { return c.done }

func (c deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
