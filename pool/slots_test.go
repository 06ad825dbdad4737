package pool

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCellTokensSpentAndRefilledManyTimes: an owner's cell tokens (3 a
// minute) are spent to the last and refilled 30 times on the bucket's
// own clock: each round has exactly 3 cells, the 4th waits 20 s (a
// token's share of the minute), a third of a minute gives back exactly
// one token, and a long pause never more than the limit; a refilled
// bucket is forgotten.
func TestCellTokensSpentAndRefilledManyTimes(t *testing.T) {
	p := &Pool{quotas: Quotas{MaxCellsPerMinutePerOwner: 3}, buckets: map[string]*bucket{}}
	now := time.Unix(1_700_000_000, 0)
	spend := func(round int) int {
		t.Helper()
		n := 0
		for ; n < 10; n++ {
			err := p.takeCellLocked("a", now)
			var qe *QuotaError
			if errors.As(err, &qe) {
				if qe.RetryAfter != 20*time.Second {
					t.Fatalf("round %d: Retry-After %s, want 20s", round, qe.RetryAfter)
				}
				return n
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	for round := range 30 {
		if n := spend(round); n != 3 {
			t.Fatalf("round %d: %d cells passed, want 3", round, n)
		}
		now = now.Add(20 * time.Second)
		if n := spend(round); n != 1 {
			t.Fatalf("round %d: %d cells after a third of a minute, want 1", round, n)
		}
		if round%2 == 0 {
			now = now.Add(time.Minute)
		} else {
			now = now.Add(time.Hour) // the bucket holds 3 at most
		}
	}
	p.pruneBucketsLocked(now.Add(time.Minute))
	if len(p.buckets) != 0 {
		t.Errorf("%d buckets kept after they refilled", len(p.buckets))
	}
}

// TestOwnerKernelSlotFreedByKillAndShutdown: under max_kernels_per_owner
// 1, a kernel ended by Kill and one ended by ShutdownOwner each give the
// owner's slot back (exit, reset and timeout do in
// TestKernelsPerOwnerQuotaAndEndReasons); a second kernel while one
// lives is refused every round.
func TestOwnerKernelSlotFreedByKillAndShutdown(t *testing.T) {
	p := newTestPool(t, func(c *Config) { c.Quotas = Quotas{MaxKernelsPerOwner: 1} })
	ctx := context.Background()
	for round, end := range []func(id string){
		func(id string) {
			if err := p.Kill(id); err != nil {
				t.Fatal(err)
			}
		},
		func(string) {
			if n := p.ShutdownOwner("a"); n != 1 {
				t.Fatalf("ShutdownOwner ended %d kernels, want 1", n)
			}
		},
		func(string) {},
	} {
		res := run(t, p, Request{Owner: "a", Code: "1"})
		if res.Kernel.Reused {
			t.Fatalf("round %d: a's cell ran on an old kernel: %+v", round, res.Kernel)
		}
		if _, err := p.Execute(ctx, Request{Owner: "a", Mode: "other", Code: "1"}); !errors.Is(err, ErrQuota) {
			t.Fatalf("round %d: a second kernel of a: %v, want ErrQuota", round, err)
		}
		end(res.Kernel.ID)
	}
}

// TestLiftedCellQuotaForgetsBuckets: once the cell quota is lifted the
// reaper forgets every owner's bucket, however recently spent, and a
// quota set again later starts each owner with a full minute's tokens.
func TestLiftedCellQuotaForgetsBuckets(t *testing.T) {
	p := &Pool{quotas: Quotas{MaxCellsPerMinutePerOwner: 3}, buckets: map[string]*bucket{}}
	now := time.Unix(1_700_000_000, 0)
	for i := range 3 {
		if err := p.takeCellLocked("a", now); err != nil {
			t.Fatalf("cell %d: %v", i, err)
		}
	}
	p.quotas = Quotas{}
	now = now.Add(time.Second)
	p.pruneBucketsLocked(now)
	if len(p.buckets) != 0 {
		t.Fatalf("%d buckets kept after the quota was lifted", len(p.buckets))
	}
	p.quotas = Quotas{MaxCellsPerMinutePerOwner: 3}
	for i := range 3 {
		if err := p.takeCellLocked("a", now); err != nil {
			t.Fatalf("cell %d under the quota set again: %v", i, err)
		}
	}
}

// TestDiedKernelSlotGivenBack: under max_kernels 1, a kernel that died in
// its cell gives its slot back when the cell returns, so another owner's
// kernel then starts without evicting anything. A slot kept would be
// evicted here; with warm spares it would keep the refill from starting
// one (TestSparesExhaustedAndRefilledManyRounds, many rounds over).
func TestDiedKernelSlotGivenBack(t *testing.T) {
	p := newTestPool(t, func(c *Config) { c.MaxKernels = 1 })
	wantStatus(t, run(t, p, Request{Owner: "a", Code: "import os; os._exit(3)"}), StatusError)
	wantStatus(t, run(t, p, Request{Owner: "b", Code: "1"}), StatusSuccess)
	if st := p.Stats(); st.Died != 1 || st.Evicted != 0 || st.KernelsLive != 1 {
		t.Fatalf("after a death and another owner's cell: %d died, %d evicted, %d live; want 1, 0, 1", st.Died, st.Evicted, st.KernelsLive)
	}
}

// TestBucketForgottenOnceFull: an owner's bucket is kept until a minute
// after its last cell, when it holds the full limit again (the same as
// none), and is forgotten from that instant; the owner then has its
// whole minute's cells.
func TestBucketForgottenOnceFull(t *testing.T) {
	last := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name  string
		prune time.Time
		kept  int
	}{
		{"a nanosecond before the minute", last.Add(time.Minute - time.Nanosecond), 1},
		{"at the minute", last.Add(time.Minute), 0},
	} {
		p := &Pool{quotas: Quotas{MaxCellsPerMinutePerOwner: 3}, buckets: map[string]*bucket{}}
		for i := range 3 {
			if err := p.takeCellLocked("a", last); err != nil {
				t.Fatalf("%s: cell %d: %v", tc.name, i, err)
			}
		}
		p.pruneBucketsLocked(tc.prune)
		if len(p.buckets) != tc.kept {
			t.Errorf("%s: %d buckets kept, want %d", tc.name, len(p.buckets), tc.kept)
		}
	}
	p := &Pool{quotas: Quotas{MaxCellsPerMinutePerOwner: 3}, buckets: map[string]*bucket{"a": {tokens: 0, at: last}}}
	for i := range 3 {
		if err := p.takeCellLocked("a", last.Add(time.Minute)); err != nil {
			t.Fatalf("a minute after a spent bucket, cell %d: %v", i, err)
		}
	}
}
