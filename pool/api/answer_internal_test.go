package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
)

// emptyPool is a pool that never starts a kernel (BeginDrain reads its
// counters), closed when the test ends.
func emptyPool(t *testing.T) *pool.Pool {
	t.Helper()
	testenv.RequirePython(t)
	p, err := pool.New(pool.Config{StateDir: t.TempDir(), DefaultInterpreter: testenv.Python})
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(context.Background()); err != nil {
			t.Errorf("pool.Close: %v", err)
		}
	})
	return p
}

// TestPoolErrorAnswers: the answer to each kind of pool error, on a node
// that takes cells and on a draining one. The status is docs/api.md's
// for the code; Retry-After comes with the refusals a client should
// retry (capacity, draining, no_node: docs/api.md) and the quota's own
// delay; an error is logged only for a 5xx that is a fault, not for the
// refusals of a full, closing or draining node.
func TestPoolErrorAnswers(t *testing.T) {
	docs := docStatuses(t)
	p := emptyPool(t)
	var logs bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	ready := NewServer(p, ServerConfig{Logger: logger})
	draining := NewServer(p, ServerConfig{Logger: logger})
	draining.BeginDrain()
	quota := &pool.QuotaError{Owner: "o", Quota: "max_cells_per_minute_per_owner", Limit: 1, RetryAfter: 7 * time.Second}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name       string
		srv        *Server
		err        error
		code       string
		retryAfter string // "": no header
		logged     bool
	}{
		{"not found", ready, pool.ErrNotFound, CodeNotFound, "", false},
		{"not found while draining", draining, pool.ErrNotFound, CodeNotFound, "", false},
		{"bad request", ready, pool.ErrBadRequest, CodeBadRequest, "", false},
		{"quota", ready, quota, CodeQuota, "7", false},
		{"capacity", ready, pool.ErrCapacity, CodeCapacity, "1", false},
		{"closed", ready, pool.ErrClosed, CodeClosed, "", false},
		{"closed by a drain", draining, pool.ErrClosed, CodeDraining, "1", false},
		{"owner not marked", draining, errUnmarked, CodeNoNode, "1", false},
		{"owner not marked, not draining", ready, errUnmarked, CodeNoNode, "1", false},
		{"spawn failed", ready, pool.ErrSpawn, CodeSpawnFailed, "", true},
		{"no space", ready, pool.ErrNoSpace, CodeNoSpace, "", true},
		{"internal", ready, boom, CodeInternal, "", true},
		{"internal while draining", draining, boom, CodeInternal, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs.Reset()
			rec := httptest.NewRecorder()
			tc.srv.writePoolError(rec, fmt.Errorf("op: %w", tc.err))
			body := rec.Body.String()
			if rec.Code != docs[tc.code] || !strings.Contains(body, `"code":"`+tc.code+`"`) {
				t.Errorf("answered %d %s, want %d (docs/api.md) with code %q", rec.Code, body, docs[tc.code], tc.code)
			}
			if ra := strings.Join(rec.Header().Values("Retry-After"), ", "); ra != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", ra, tc.retryAfter)
			}
			wantLines := 0
			if tc.logged {
				wantLines = 1
			}
			if n := strings.Count(logs.String(), "[ERROR]"); n != wantLines {
				t.Errorf("%d error log lines, want %d: %q", n, wantLines, logs.String())
			}
		})
	}
}

// deadlineRecorder is a ResponseWriter that keeps the read deadlines a
// handler sets through http.ResponseController.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
}

func (r *deadlineRecorder) SetReadDeadline(t time.Time) error {
	r.deadlines = append(r.deadlines, t)
	return nil
}

// With the zero config a request body must arrive within the documented
// 30 s (docs/api.md, 408 request_timeout): the connection's read deadline
// is set that far ahead of the request.
func TestDefaultBodyReadDeadline(t *testing.T) {
	const documented = 30 * time.Second
	s := NewServer(nil, ServerConfig{}) // a tool answer touches no pool
	rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	req := httptest.NewRequest(http.MethodPost, "/v1/tool-calls/t1", strings.NewReader(`{"result":"r"}`))
	before := time.Now()
	s.ServeHTTP(rec, req)
	after := time.Now()
	if rec.Code != http.StatusNotFound {
		t.Fatalf("answer to an unknown tool call: %d %s, want 404", rec.Code, rec.Body)
	}
	if len(rec.deadlines) == 0 {
		t.Fatal("no read deadline was set for the body")
	}
	if d := rec.deadlines[0]; d.Before(before.Add(documented)) || d.After(after.Add(documented)) {
		t.Fatalf("body read deadline %v after the request, want %v", d.Sub(before), documented)
	}
}

// writeJSON's pooled buffers: one grown past 64 KiB by a large answer is
// not kept for later answers (each would hold it), one of exactly 64 KiB
// is. sync.Pool may drop what it is given (under -race it drops a
// quarter at random), so each side is tried many times.
func TestJSONBufferPoolCap(t *testing.T) {
	const limit = 64 << 10 // the cap jsonBufs documents
	big := map[string]string{"output": strings.Repeat("x", 256<<10)}
	for range 50 {
		writeJSON(httptest.NewRecorder(), http.StatusOK, big)
		if b := jsonBufs.Get().(*bytes.Buffer); b.Cap() > limit {
			t.Fatalf("the pool kept a %d-byte buffer after a large answer", b.Cap())
		}
	}
	kept := false
	for i := 0; i < 50 && !kept; i++ {
		putJSONBuf(bytes.NewBuffer(make([]byte, 0, limit)))
		kept = jsonBufs.Get().(*bytes.Buffer).Cap() == limit
	}
	if !kept {
		t.Fatal("a buffer of exactly 64 KiB was never kept")
	}
}
