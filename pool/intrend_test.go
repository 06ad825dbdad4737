//go:build unix

package pool_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/metrics"
	"github.com/kernpool/kernpool/pool"
)

// A cell that ignores SIGINT outlives the interrupt's grace and is killed
// with its kernel. The kernel's end (kernpool_kernel_ends_total's reason,
// from Observer.KernelEnded) names what stopped the cell, as docs/ops.md
// lists the reasons: "interrupt" for an explicit interrupt (of the kernel
// or of its owner) and for a caller gone, "timeout" for the cell's
// timeout; never "crash", which is a kernel dying of its own.
func TestInterruptKillEndReason(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stop       func(t *testing.T, p *pool.Pool, id string, cancel context.CancelFunc) // nil: the timeout stops it
		wantStatus pool.Status
		wantEnd    pool.EndReason
	}{
		{"interrupt", func(t *testing.T, p *pool.Pool, id string, _ context.CancelFunc) {
			if err := p.Interrupt(id); err != nil {
				t.Errorf("interrupt %s: %v", id, err)
			}
		}, pool.StatusInterrupted, pool.EndInterrupt},
		{"owner interrupt", func(t *testing.T, p *pool.Pool, id string, _ context.CancelFunc) {
			if ids := p.InterruptOwner("", ""); len(ids) != 1 || ids[0] != id {
				t.Errorf("owner interrupt: %v, want [%s]", ids, id)
			}
		}, pool.StatusInterrupted, pool.EndInterrupt},
		{"caller gone", func(_ *testing.T, _ *pool.Pool, _ string, cancel context.CancelFunc) { cancel() }, pool.StatusInterrupted, pool.EndInterrupt},
		{"timeout", nil, pool.StatusTimeout, pool.EndTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New("test", "test", []string{"default"})
			p := newTestPool(t, func(c *pool.Config) {
				c.Observer = m
				// The cell ignores SIGINT: any grace ends in the kill.
				c.Policies = map[string]pool.CellPolicy{"default": {InterruptGrace: 100 * time.Millisecond}}
			})
			// A handler a cell installs is kept for the next cell, so
			// the loop ignores SIGINT from its first line on.
			warm := run(t, p, pool.Request{Code: "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)"})
			started := filepath.Join(testTempDir(t), "started")
			req := pool.Request{Code: fmt.Sprintf("import os; os.write(1, b'before the kill\\n')\nopen(%q, 'w').close()\nwhile True: pass", started)}
			if tc.stop == nil {
				req.Timeout = time.Second
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resc := make(chan *pool.Result, 1)
			go func() {
				res, err := p.Execute(ctx, req)
				if err != nil {
					t.Errorf("execute: %v", err)
				}
				resc <- res
			}()
			if tc.stop != nil {
				waitFor(t, "the cell to run", func() bool { _, err := os.Stat(started); return err == nil })
				tc.stop(t, p, warm.Kernel.ID, cancel)
			}
			res := <-resc
			if res == nil || res.Status != tc.wantStatus || res.Kernel.StatePreserved {
				t.Fatalf("cell ignoring SIGINT: %+v; want %s, the kernel killed", res, tc.wantStatus)
			}
			// A kill past an explicit interrupt's grace keeps what the
			// cell printed before the marker.
			if tc.name == "interrupt" || tc.name == "owner interrupt" {
				if want := "before the kill\n\n[execution interrupted — the kernel was killed]"; res.Output != want {
					t.Errorf("output %q, want %q", res.Output, want)
				}
			}
			body := scrape(m)
			for _, r := range pool.EndReasons() {
				want := 0
				if r == tc.wantEnd {
					want = 1
				}
				line := fmt.Sprintf("kernpool_kernel_ends_total{mode=%q,reason=%q} %d\n", "default", r, want)
				if !strings.Contains(body, line) {
					t.Errorf("want %s", strings.TrimSpace(line))
				}
			}
			if t.Failed() {
				t.Logf("metrics:\n%s", grepLines(body, "kernpool_kernel_ends_total{"))
			}
		})
	}
}

// scrape is the metrics' text exposition.
func scrape(m *metrics.Metrics) string {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// grepLines is the lines of body that start with prefix.
func grepLines(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
