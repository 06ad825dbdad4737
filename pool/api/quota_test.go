//go:build unix

package api_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// retryAfter sends a cell of owner that must be refused by quota (429
// "quota", its message naming the quota) and returns its Retry-After in
// seconds; the Go client reads the same figure.
func retryAfter(t *testing.T, d *daemon, body, quota string) int {
	t.Helper()
	status, hdr, eb := d.raw(t, http.MethodPost, "/v1/execute", body)
	if status != http.StatusTooManyRequests || eb.Code != api.CodeQuota || !strings.Contains(eb.Error, quota) {
		t.Fatalf("%s: status %d %+v, want 429 quota naming %s", body, status, eb, quota)
	}
	secs, err := strconv.Atoi(hdr.Get("Retry-After"))
	if err != nil {
		t.Fatalf("Retry-After %q is not whole seconds", hdr.Get("Retry-After"))
	}
	return secs
}

// TestQuotaIs429WithRetryAfterSeconds: an owner over a quota gets 429
// "quota" with Retry-After in seconds (docs/api.md) saying when a retry
// may pass: the kernel quota when its idle kernel is reaped (by the
// configured idle_timeout, not the default), the cell rate when the next
// token is due (a minute's worth refills in a minute).
func TestQuotaIs429WithRetryAfterSeconds(t *testing.T) {
	const idle = 2 * time.Hour
	d := startDaemon(t, daemonOpts{pool: func(c *pool.Config) {
		c.IdleTimeout = idle
		c.Quotas = pool.Quotas{MaxKernelsPerOwner: 1, MaxCellsPerMinutePerOwner: 2}
	}})
	start := time.Now()
	d.exec(t, "k", "1")
	// A second kernel for k (another cwd is another kernel): refused until
	// the first one's idle timeout.
	secs := retryAfter(t, d, `{"owner":"k","code":"1","cwd":"/tmp"}`, "max_kernels_per_owner")
	if secs > int(idle/time.Second) || secs < int(idle/time.Second)-secondsSince(start) {
		t.Fatalf("kernel quota Retry-After %d s, want about %d (the idle timeout)", secs, int(idle/time.Second))
	}

	// Two cells a minute: the third waits about 30 s for its token.
	start = time.Now()
	d.exec(t, "r", "1")
	d.exec(t, "r", "2")
	secs = retryAfter(t, d, `{"owner":"r","code":"3"}`, "max_cells_per_minute_per_owner")
	if secs > 30 || secs < 30-secondsSince(start) {
		t.Fatalf("cell rate Retry-After %d s, want at most 30 (half a minute per token)", secs)
	}
	_, err := d.client.Execute(testCtx(t), pool.Request{Owner: "r", Code: "4"})
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusTooManyRequests || ae.RetryAfter < time.Second || ae.RetryAfter > 30*time.Second ||
		ae.RetryAfter%time.Second != 0 || !errors.Is(err, pool.ErrQuota) {
		t.Fatalf("the Go client over the cell rate: %v (%+v)", err, ae)
	}
}

// secondsSince is how far a Retry-After may fall short of its full
// figure: the whole seconds the test itself took since start (rounded up,
// plus one for the header's rounding), however loaded the host.
func secondsSince(start time.Time) int {
	return int(time.Since(start)/time.Second) + 2
}
