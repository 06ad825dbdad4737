package pool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/kernpool/kernpool/internal/memtest"
	"github.com/kernpool/kernpool/pool"
)

// findSentinel is cell code that digs the runner's frame sentinel out of
// the runner's own frames, as an attacker would.
const findSentinel = `import os, sys
f, sent = sys._getframe(), None
while f is not None and sent is None:
    sent = getattr(f.f_locals.get("self"), "sentinel", None)
    f = f.f_back
assert sent, "sentinel not found"
`

// Inline caps of the default pipeline: the stdout head/tail, stderr, and
// the traceback (capped like stderr); each plus its truncation notice.
const (
	capNotice    = 128
	maxOutput    = 50_000 + 2*10_000 + 3*capNotice + 64
	maxErrorText = 10_000 + capNotice + 256
)

// maxAttackGrowth bounds the daemon's peak RSS growth during one attack.
const maxAttackGrowth = 32 << 20

// maxResultBytes bounds one cell's whole JSON result (no displays yet).
const maxResultBytes = 1 << 20

// underAttack runs attack while another owner keeps running cells on the
// same pool, and returns the daemon's peak RSS growth during the attack.
// It fails the test when a bystander cell fails or none completed while
// the attack ran (the daemon stopped answering others).
func underAttack(t *testing.T, p *pool.Pool, attack func()) int64 {
	t.Helper()
	run(t, p, pool.Request{Owner: "bystander", Code: "n = 0"}) // the bystander's kernel exists before
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	served, failed := 0, []string(nil)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, err := p.Execute(context.Background(), pool.Request{Owner: "bystander", Code: "n += 1\nn"})
			mu.Lock()
			if err != nil || res.Status != pool.StatusSuccess {
				failed = append(failed, res.Error)
			} else {
				served++
			}
			mu.Unlock()
		}
	})
	growth := memtest.PeakGrowth(t, attack)
	close(stop)
	wg.Wait()
	if served == 0 || len(failed) > 0 {
		t.Errorf("bystander during the attack: %d served, failures %q", served, failed)
	}
	t.Logf("daemon peak RSS growth during the attack: %.1f MiB; bystander cells served meanwhile: %d", float64(growth)/(1<<20), served)
	if growth > maxAttackGrowth && !memtest.RaceEnabled {
		t.Errorf("daemon peak RSS grew by %d bytes, over the %d bound", growth, maxAttackGrowth)
	}
	return growth
}

// assertResultBounded fails when a field or the whole result is over its
// cap, and returns a line with the figures for the test's log.
func assertResultBounded(t *testing.T, res *pool.Result, maxOutput, maxError int) string {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) > maxOutput || len(res.Error) > maxError || len(res.Warning) > 4096 || len(b) > maxResultBytes {
		t.Fatalf("result over its caps: JSON %d (max %d), output %d (max %d), error %d (max %d), warning %d (max 4096)",
			len(b), maxResultBytes, len(res.Output), maxOutput, len(res.Error), maxError, len(res.Warning))
	}
	return fmt.Sprintf("result: %d bytes of JSON, output %d, error %d, warning %d", len(b), len(res.Output), len(res.Error), len(res.Warning))
}
