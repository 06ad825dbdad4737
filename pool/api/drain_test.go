//go:build unix

package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// serve sends one request through h in process.
func serve(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec
}

// The node's state through its transitions, as State and GET /v1/ready
// report it: a shutdown without a drain is not_ready (code closed), a
// drain's draining and drained states are 503 draining, a shutdown
// during a drain leaves it draining, and ending a drain that never began
// changes nothing.
func TestNodeStates(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	for _, tc := range []struct {
		name   string
		steps  func(*api.Server)
		status int
		state  api.NodeState
		code   string
	}{
		{"new", func(*api.Server) {}, http.StatusOK, api.StateReady, ""},
		{"end without a drain", func(s *api.Server) { s.EndDrain() }, http.StatusOK, api.StateReady, ""},
		{"shutting down", func(s *api.Server) { s.SetDraining() }, http.StatusServiceUnavailable, api.StateNotReady, api.CodeClosed},
		{"draining", func(s *api.Server) { s.BeginDrain() }, http.StatusServiceUnavailable, api.StateDraining, api.CodeDraining},
		{"shutting down while draining", func(s *api.Server) { s.BeginDrain(); s.SetDraining() },
			http.StatusServiceUnavailable, api.StateDraining, api.CodeDraining},
		{"drained", func(s *api.Server) { s.BeginDrain(); s.EndDrain() }, http.StatusServiceUnavailable, api.StateDrained, api.CodeDraining},
	} {
		srv := api.NewServer(d.pool, api.ServerConfig{})
		tc.steps(srv)
		rec := serve(srv, http.MethodGet, "/v1/ready", "")
		var rr api.ReadyResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &rr); err != nil {
			t.Fatalf("%s: /v1/ready %q: %v", tc.name, rec.Body, err)
		}
		if rec.Code != tc.status || rr.State != tc.state || rr.Code != tc.code || srv.State() != tc.state {
			t.Errorf("%s: /v1/ready %d %+v, State %q; want %d state %q code %q",
				tc.name, rec.Code, rr, srv.State(), tc.status, tc.state, tc.code)
		}
	}
}

// POST /v1/drain?wait=true streams the drain's status, one NDJSON line
// per change, until the drained line; the daemon's OnDrain runs once,
// and a later POST answers 202 with the status.
func TestDrainStream(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	if rec := serve(api.NewServer(d.pool, api.ServerConfig{}), http.MethodPost, "/v1/drain", ""); rec.Code != http.StatusNotImplemented {
		t.Fatalf("a drain without a daemon to drain: %d %s, want 501", rec.Code, rec.Body)
	}
	var srv *api.Server
	var calls atomic.Int32
	ended := make(chan struct{})
	srv = api.NewServer(d.pool, api.ServerConfig{OnDrain: func() {
		calls.Add(1)
		go func() { // as the daemon: close the pool (here: nothing), then end
			defer close(ended)
			srv.EndDrain()
		}()
	}})
	// A stream that never ends is cut at the hang bound.
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/drain?wait=true", nil).WithContext(testCtx(t)))
	lines := strings.Split(strings.TrimSpace(rec.Body.String()), "\n")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("drain stream: %d %s %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	for i, l := range lines {
		var st api.DrainStatus
		if err := json.Unmarshal([]byte(l), &st); err != nil || st.StartedAt == nil {
			t.Fatalf("line %d %q: %+v, %v", i, l, st, err)
		}
		if want := api.StateDraining; i == len(lines)-1 {
			if st.State != api.StateDrained {
				t.Fatalf("the stream's last line is %q, want drained", l)
			}
		} else if st.State != want {
			t.Fatalf("line %d is %q, want draining", i, l)
		}
	}
	recv(t, "the drain's end", ended)
	rec = serve(srv, http.MethodPost, "/v1/drain", "")
	var st api.DrainStatus
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != http.StatusAccepted || st.State != api.StateDrained {
		t.Fatalf("a second drain: %d %q, %v; want 202 drained", rec.Code, rec.Body, err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("OnDrain ran %d times, want 1", n)
	}
}

// A drain's progress counts the saves since the drain began, not those
// of evictions before it: kernels_to_save is saved + failed + remaining.
// Before the drain a small owner's save succeeds and a big one's is
// refused (over checkpoint_max_bytes_per_owner); the drain then has one
// kernel to save, whose save is refused too.
func TestDrainProgressCountsItsOwnSaves(t *testing.T) {
	d := startDaemon(t, daemonOpts{pool: func(c *pool.Config) {
		c.MaxKernels = 1 // each new owner evicts (and saves) the last one
		c.Policies = map[string]pool.CellPolicy{"default": {Persist: true, InterruptGrace: testenv.Patience}}
		c.Checkpoints.Idle = -1
		c.Checkpoints.MaxBytesPerOwner = 64 << 10
	}})
	big := "x = 'b' * (1 << 20)"
	d.exec(t, "small", "x = 1")
	d.exec(t, "big", big) // evicts small: saved
	waitFor(t, "small's save", func() bool { return d.pool.Stats().CheckpointsSaved == 1 })
	d.exec(t, "last", big) // evicts big: refused
	waitFor(t, "big's refused save", func() bool { return d.pool.Stats().CheckpointsFailed == 1 })
	srv := api.NewServer(d.pool, api.ServerConfig{})
	srv.BeginDrain()
	status := func() api.DrainStatus {
		t.Helper()
		rec := serve(srv, http.MethodGet, "/v1/drain", "")
		var st api.DrainStatus
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("GET /v1/drain: %d %q, %v", rec.Code, rec.Body, err)
		}
		return st
	}
	type counts struct{ toSave, saved, failed, remaining int }
	if st := status(); (counts{st.KernelsToSave, st.Saved, st.Failed, st.Remaining}) != (counts{1, 0, 0, 1}) {
		t.Fatalf("at the drain's start: %+v, want 1 to save, 0 saved, 0 failed, 1 remaining", st)
	}
	if err := d.pool.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	srv.EndDrain()
	if st := status(); st.State != api.StateDrained || (counts{st.KernelsToSave, st.Saved, st.Failed, st.Remaining}) != (counts{1, 0, 1, 0}) {
		t.Fatalf("drained: %+v, want 1 to save, 0 saved, 1 failed, 0 remaining", st)
	}
}
