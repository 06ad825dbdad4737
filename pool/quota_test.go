package pool

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is an Observer that counts what it is told.
type recorder struct {
	mu       sync.Mutex
	starts   int
	spares   int
	ends     map[EndReason]int
	refusals map[Refusal]int
	cells    []CellEvent
}

func newRecorder() *recorder {
	return &recorder{ends: map[EndReason]int{}, refusals: map[Refusal]int{}}
}

func (r *recorder) KernelStarted(string) { r.mu.Lock(); r.starts++; r.mu.Unlock() }
func (r *recorder) KernelEnded(_ string, why EndReason) {
	r.mu.Lock()
	r.ends[why]++
	r.mu.Unlock()
}
func (r *recorder) SpawnFailed(string) {}
func (r *recorder) SparesChanged(_ string, delta int) {
	r.mu.Lock()
	r.spares += delta
	r.mu.Unlock()
}
func (r *recorder) CellDone(ev *CellEvent) {
	r.mu.Lock()
	r.cells = append(r.cells, *ev)
	r.mu.Unlock()
}
func (r *recorder) Refused(_ string, why Refusal) {
	r.mu.Lock()
	r.refusals[why]++
	r.mu.Unlock()
}

func TestCellsPerMinuteQuota(t *testing.T) {
	rec := newRecorder()
	p := newTestPool(t, func(c *Config) {
		c.Quotas = Quotas{MaxCellsPerMinutePerOwner: 3}
		c.Observer = rec
	})
	for range 3 {
		wantStatus(t, run(t, p, Request{Owner: "a", Code: "1"}), StatusSuccess)
	}
	_, err := p.Execute(context.Background(), Request{Owner: "a", Code: "1"})
	var qe *QuotaError
	if !errors.Is(err, ErrQuota) || !errors.As(err, &qe) || qe.Quota != "max_cells_per_minute_per_owner" ||
		qe.RetryAfter < time.Second || qe.RetryAfter > 20*time.Second {
		t.Fatalf("4th cell in a minute: %v", err)
	}
	// Another owner has a bucket of its own.
	wantStatus(t, run(t, p, Request{Owner: "b", Code: "1"}), StatusSuccess)
	// Lifting the quota applies at once.
	if err := p.SetQuotas(Quotas{}); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "1"}), StatusSuccess)
	if rec.refusals[RefusedQuota] != 1 || len(rec.cells) != 5 || rec.starts != 2 {
		t.Fatalf("observer saw %d quota refusals, %d cells, %d starts; want 1, 5, 2", rec.refusals[RefusedQuota], len(rec.cells), rec.starts)
	}
}

func TestKernelsPerOwnerQuotaAndEndReasons(t *testing.T) {
	rec := newRecorder()
	p := newTestPool(t, killOnTimeout, func(c *Config) { // the timeout ends its kernel
		c.Quotas = Quotas{MaxKernelsPerOwner: 1}
		c.Observer = rec
	})
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "1"}), StatusSuccess)
	_, err := p.Execute(context.Background(), Request{Owner: "a", Mode: "other", Code: "1"})
	// The fix is ending one of a's kernels, not waiting out the idle
	// timeout: the message says so, and how long the wait would be.
	want := `execute: owner "a" already has 1 live kernels, its quota max_kernels_per_owner: shut one of them down (kernpool kill KERNEL_ID; kernpool ps lists them), or wait until its next idle kernel is reaped (in `
	if !errors.Is(err, ErrQuota) || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "retry") {
		t.Fatalf("a's second kernel: %v\nwant the message %q...", err, want)
	}
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "import sys; sys.exit(3)"}), StatusSuccess)
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "1"}), StatusSuccess)
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "1", Reset: true}), StatusSuccess)
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "import time; time.sleep(9)", Timeout: 200 * time.Millisecond}), StatusTimeout)
	p.ShutdownOwner("a")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	wantEnds := map[EndReason]int{EndExit: 1, EndReset: 1, EndTimeout: 1, EndShutdown: 0}
	for r, n := range wantEnds {
		if rec.ends[r] != n {
			t.Errorf("ends[%s] = %d, want %d (all: %v)", r, rec.ends[r], n, rec.ends)
		}
	}
	if rec.starts != 3 || rec.refusals[RefusedQuota] != 1 {
		t.Errorf("starts %d, quota refusals %d; want 3 and 1", rec.starts, rec.refusals[RefusedQuota])
	}
}
