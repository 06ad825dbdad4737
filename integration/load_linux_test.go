//go:build integration && linux

package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// daemonFigures are the resource figures that must be flat across a load.
type daemonFigures struct {
	fds, goroutines int
	rssKiB          int64
}

func figures(t *testing.T, d *Daemon) daemonFigures {
	t.Helper()
	h, err := d.API().Health(context.Background())
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	f := daemonFigures{fds: len(listFDs(d.Pid())), goroutines: h.Goroutines}
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.Pid()))
	for _, line := range strings.Split(string(st), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f.rssKiB, _ = strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
		}
	}
	return f
}

// settle waits until the daemon reports no kernels and its goroutines are
// back near base, then returns its figures.
func settle(t *testing.T, d *Daemon, base daemonFigures) daemonFigures {
	t.Helper()
	deadline := time.Now().Add(scaled(testenv.Patience))
	for {
		h, err := d.API().Health(context.Background())
		f := figures(t, d)
		if err == nil && h.Kernels == 0 && f.goroutines <= base.goroutines+5 && f.fds <= base.fds {
			return f
		}
		if time.Now().After(deadline) {
			return f
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestLoad: KERNPOOL_LOAD_OWNERS (200) owners x KERNPOOL_LOAD_CELLS (20)
// cells with a cap of 32 live kernels, 16 at a time. Every cell is answered
// (success, or an error that says why), and the daemon's fds, goroutines
// and RSS are flat before and after.
func TestLoad(t *testing.T) {
	requireDaemon(t)
	owners, cells := envInt("KERNPOOL_LOAD_OWNERS", 200), envInt("KERNPOOL_LOAD_CELLS", 20)
	o := capped()
	o.MaxKernels = 32
	d := StartDaemon(t, o)
	runOwners(t, d, "warm", 16, 2) // let lazy pools and caches exist before the baseline
	base := settle(t, d, figures(t, d))
	start := time.Now()
	ok, refused := runOwners(t, d, "load", owners, cells)
	t.Logf("%d owners x %d cells: %d ok, %d refused for capacity, in %v", owners, cells, ok, refused, time.Since(start).Round(time.Millisecond))
	// 16 owners in flight under a cap of 32, each shut down after its
	// cells: the cap is never reached, so every cell must succeed.
	if ok != int64(owners*cells) || refused != 0 {
		t.Errorf("%d ok and %d refused, want all %d cells ok", ok, refused, owners*cells)
	}
	after := settle(t, d, base)
	t.Logf("daemon before: %+v after: %+v", base, after)
	if after.fds > base.fds {
		t.Errorf("daemon fds grew from %d to %d: %v", base.fds, after.fds, extraFDs(d.baseFDs, listFDs(d.Pid())))
	}
	if after.goroutines > base.goroutines+5 {
		t.Errorf("daemon goroutines grew from %d to %d", base.goroutines, after.goroutines)
	}
	if limit := base.rssKiB*3/2 + 32<<10; after.rssKiB > limit {
		t.Errorf("daemon RSS grew from %d KiB to %d KiB (limit %d)", base.rssKiB, after.rssKiB, limit)
	}
	d.AssertClean(t)
}

// runOwners runs cells cells for each of n owners (owner-major, 16 owners
// in flight) and returns how many succeeded (each printing its session's
// count) and how many were refused for capacity (503). Anything else fails t.
func runOwners(t *testing.T, d *Daemon, prefix string, n, cells int) (ok, refused int64) {
	t.Helper()
	var okN, refN atomic.Int64
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				owner := fmt.Sprintf("%s-%d", prefix, i)
				for c := 0; c < cells; c++ {
					ctx, cancel := context.WithTimeout(context.Background(), scaled(2*time.Minute))
					res, err := d.API().Execute(ctx, ExecReq{Owner: owner, Code: "n = globals().get('n', 0) + 1\nprint(n)", Timeout: "60s"})
					cancel()
					switch {
					case err != nil:
						// Only a capacity refusal (503 with its code) is an
						// answer; any other error is a failure.
						if ae, isAPI := err.(*APIError); isAPI && ae.Status == 503 && strings.Contains(ae.Body, `"capacity"`) {
							refN.Add(1)
							continue
						}
						t.Errorf("%s cell %d failed: %v", owner, c, err)
					case res.Status == "success" && res.Output == fmt.Sprintf("%d\n", c+1):
						d.noteResult(res)
						okN.Add(1)
					default:
						t.Errorf("%s cell %d: %+v, want success printing %d (the session's state)", owner, c, res, c+1)
					}
				}
				if err := d.API().Shutdown(context.Background(), owner); err != nil {
					t.Errorf("shutdown %s: %v", owner, err)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	return okN.Load(), refN.Load()
}
