//go:build unix

package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kernpool/kernpool/pool/api"
)

// answer is one scripted answer of a fake node.
type answer struct {
	status int
	body   string
}

// scriptedNode serves each "METHOD path?query" of script with its
// answer (404 otherwise) on loopback http, and returns a network client
// of it.
func scriptedNode(t *testing.T, script map[string]answer) *api.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := script[r.Method+" "+r.URL.RequestURI()]
		if !ok {
			a = answer{http.StatusNotFound, `{"error":"no such route","code":"not_found"}`}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	c, err := api.NewNetworkClient(srv.URL, api.NetworkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// goneNode is a client of a node that no longer listens.
func goneNode(t *testing.T) *api.Client {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, err := api.NewNetworkClient(url, api.NetworkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Ready returns the node's state, with the node's refusal as an
// *APIError when it is not ready, and ErrProtocol for a body it cannot
// read.
func TestNetworkClientReady(t *testing.T) {
	for _, tc := range []struct {
		name      string
		a         answer
		state     api.NodeState
		status    int    // of the *APIError; 0: no error
		code      string // of the *APIError
		protocol  bool
		unreached bool
	}{
		{name: "ready", a: answer{200, `{"state":"ready"}`}, state: api.StateReady},
		{name: "draining", a: answer{503, `{"state":"draining","code":"draining","error":"draining"}`},
			state: api.StateDraining, status: 503, code: api.CodeDraining},
		{name: "not JSON", a: answer{200, `ready`}, protocol: true},
		{name: "node gone", unreached: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := goneNode(t)
			if !tc.unreached {
				c = scriptedNode(t, map[string]answer{"GET /v1/ready": tc.a})
			}
			state, err := c.Ready(testCtx(t))
			if state != tc.state {
				t.Errorf("state %q, want %q", state, tc.state)
			}
			switch {
			case tc.unreached, tc.protocol:
				if err == nil || isProtocol(err) != tc.protocol {
					t.Errorf("error %v, want one (protocol %v)", err, tc.protocol)
				}
			case tc.status == 0:
				if err != nil {
					t.Errorf("error %v, want none", err)
				}
			default:
				if ae := apiErr(t, err); ae.StatusCode != tc.status || ae.Code != tc.code {
					t.Errorf("error %d %q, want %d %q", ae.StatusCode, ae.Code, tc.status, tc.code)
				}
			}
		})
	}
}

// DrainStatus and Drain without progress return the node's status, and
// its refusal (an admin endpoint) as the *APIError.
func TestNetworkClientDrainNoWait(t *testing.T) {
	c := scriptedNode(t, map[string]answer{
		"GET /v1/drain":  {200, `{"state":"draining","cells_running":2,"saved":1}`},
		"POST /v1/drain": {202, `{"state":"draining","cells_running":3,"kernels_to_save":4}`},
	})
	st, err := c.DrainStatus(testCtx(t))
	if err != nil || st.State != api.StateDraining || st.CellsRunning != 2 || st.Saved != 1 {
		t.Fatalf("DrainStatus: %+v, %v", st, err)
	}
	st, err = c.Drain(testCtx(t), nil)
	if err != nil || st.State != api.StateDraining || st.CellsRunning != 3 || st.KernelsToSave != 4 {
		t.Fatalf("Drain: %+v, %v", st, err)
	}

	forbidden := answer{403, `{"error":"this endpoint needs an admin credential","code":"forbidden"}`}
	c = scriptedNode(t, map[string]answer{"GET /v1/drain": forbidden, "POST /v1/drain": forbidden,
		"POST /v1/drain?wait=true": forbidden})
	if st, err := c.DrainStatus(testCtx(t)); st != nil || apiErr(t, err).StatusCode != 403 {
		t.Errorf("DrainStatus refused: %+v, %v; want the 403", st, err)
	}
	if st, err := c.Drain(testCtx(t), nil); st != nil || apiErr(t, err).Code != api.CodeForbidden {
		t.Errorf("Drain refused: %+v, %v; want the 403", st, err)
	}
	if st, err := c.Drain(testCtx(t), func(api.DrainStatus) {}); st != nil || apiErr(t, err).Code != api.CodeForbidden {
		t.Errorf("Drain(progress) refused: %+v, %v; want the 403", st, err)
	}

	// A 202 whose body is not a status is the daemon's protocol error;
	// a 200 to the no-wait POST is not the answer it expects either.
	c = scriptedNode(t, map[string]answer{"POST /v1/drain": {202, `[]`}})
	if st, err := c.Drain(testCtx(t), nil); st != nil || !isProtocol(err) {
		t.Errorf("Drain with a bad body: %+v, %v; want ErrProtocol", st, err)
	}
	c = scriptedNode(t, map[string]answer{"POST /v1/drain": {200, `{"state":"draining"}`}})
	if st, err := c.Drain(testCtx(t), nil); st != nil || err == nil {
		t.Errorf("Drain answered 200: %+v, %v; want an error", st, err)
	}
	c = goneNode(t)
	if st, err := c.Drain(testCtx(t), nil); st != nil || err == nil {
		t.Errorf("Drain of a gone node: %+v, %v; want an error", st, err)
	}
	if st, err := c.Drain(testCtx(t), func(api.DrainStatus) {}); st != nil || err == nil {
		t.Errorf("Drain(progress) of a gone node: %+v, %v; want an error", st, err)
	}
}

// Drain with progress hands on each status line (blank lines skipped)
// and returns the last; a broken line or an empty stream is ErrProtocol.
func TestNetworkClientDrainProgress(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     string
		states   []api.NodeState // handed to progress
		last     api.NodeState   // returned; "" for nil
		protocol bool
	}{
		{name: "to drained", body: "{\"state\":\"draining\"}\n\n  \n{\"state\":\"drained\"}\n",
			states: []api.NodeState{api.StateDraining, api.StateDrained}, last: api.StateDrained},
		{name: "ends at daemon exit", body: "{\"state\":\"draining\"}\n",
			states: []api.NodeState{api.StateDraining}, last: api.StateDraining},
		{name: "broken line", body: "{\"state\":\"draining\"}\n{\"state\":\n",
			states: []api.NodeState{api.StateDraining}, last: api.StateDraining, protocol: true},
		{name: "empty", body: "\n", protocol: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := scriptedNode(t, map[string]answer{"POST /v1/drain?wait=true": {200, tc.body}})
			var got []api.NodeState
			st, err := c.Drain(testCtx(t), func(s api.DrainStatus) { got = append(got, s.State) })
			if len(got) != len(tc.states) {
				t.Fatalf("progress %q, want %q", got, tc.states)
			}
			for i := range got {
				if got[i] != tc.states[i] {
					t.Fatalf("progress %q, want %q", got, tc.states)
				}
			}
			if isProtocol(err) != tc.protocol || (!tc.protocol && err != nil) {
				t.Errorf("error %v, want protocol error %v", err, tc.protocol)
			}
			if tc.last == "" {
				if st != nil {
					t.Errorf("returned %+v, want nil", st)
				}
			} else if st == nil || st.State != tc.last {
				t.Errorf("returned %+v, want state %q", st, tc.last)
			}
		})
	}
}

// Settings returns the node's settings, and its refusal as the
// *APIError.
func TestNetworkClientSettings(t *testing.T) {
	c := scriptedNode(t, map[string]answer{"GET /v1/settings": {200, `{}`}})
	if st, err := c.Settings(testCtx(t)); st == nil || err != nil {
		t.Fatalf("Settings: %+v, %v", st, err)
	}
	c = scriptedNode(t, map[string]answer{"GET /v1/settings": {403, `{"error":"admin only","code":"forbidden"}`}})
	if st, err := c.Settings(testCtx(t)); st != nil || apiErr(t, err).StatusCode != 403 {
		t.Fatalf("Settings refused: %+v, %v; want the 403", st, err)
	}
}
