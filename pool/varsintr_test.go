//go:build unix

package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// A listing whose repr loops is stopped by an explicit interrupt:
// ErrInterrupted (not a timeout, not a bare kernel error), and the kernel
// keeps its state. A repr that ignores the interrupt outlives its grace
// and is killed with the kernel: still ErrInterrupted (the API's 409
// interrupted, as a deadline's kill stays ErrTimeout), its message saying
// the kernel was killed.
func TestVariablesInterruptedByRequest(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignoring SIGINT %v", ignore), func(t *testing.T) {
			p := newTestPool(t)
			runs := filepath.Join(testTempDir(t), "repr-runs")
			pre := ""
			if ignore {
				pre = "  signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
			}
			warm := run(t, p, Request{Code: fmt.Sprintf("import signal\nx = 41\nclass A:\n def __repr__(self):\n%s"+
				"  open(%q, 'w').close()\n  while True: pass\na = A()", pre, runs)})
			id, pid := warm.Kernel.ID, pidOf(t, p, warm.Kernel.ID)
			errc := make(chan error, 1)
			go func() {
				_, err := p.Variables(context.Background(), id)
				errc <- err
			}()
			waitFor(t, "the listing's repr to run", func() bool { _, err := os.Stat(runs); return err == nil })
			if err := p.Interrupt(id); err != nil {
				t.Fatalf("interrupt during the listing: %v", err)
			}
			var err error
			select {
			case err = <-errc:
			case <-time.After(testenv.Patience):
				t.Fatal("hang: the interrupted listing did not return")
			}
			if ignore {
				if !errors.Is(err, ErrInterrupted) || errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "the kernel was killed and its state is lost") {
					t.Fatalf("listing whose repr ignored the interrupt: %v; want ErrInterrupted saying the kernel was killed", err)
				}
				assertDead(t, pid)
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
