//go:build unix

package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/kernpool/kernpool/pool/api"
)

// TestOwnerGenerationFenced: a request whose owner generation is older
// than one the node has seen is 409 fenced on every owner endpoint; the
// same or a newer one is served; a malformed one is 400.
func TestOwnerGenerationFenced(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	cases := []struct {
		name, method, path, body, gen string
		status                        int
		code                          string
	}{
		{"first", "POST", "/v1/execute", `{"owner":"o","code":"1"}`, "2", 200, ""},
		{"same", "POST", "/v1/execute", `{"owner":"o","code":"1"}`, "2", 200, ""},
		{"older execute", "POST", "/v1/execute", `{"owner":"o","code":"1"}`, "1", 409, api.CodeFenced},
		{"older interrupt", "POST", "/v1/owners/o/interrupt", "", "1", 409, api.CodeFenced},
		{"older shutdown", "POST", "/v1/owners/o/shutdown", "", "1", 409, api.CodeFenced},
		{"malformed", "POST", "/v1/execute", `{"owner":"o","code":"1"}`, "two", 400, api.CodeBadRequest},
		{"other owner", "POST", "/v1/execute", `{"owner":"p","code":"1"}`, "1", 200, ""},
		{"newer", "POST", "/v1/execute", `{"owner":"o","code":"1"}`, "3", 200, ""},
		{"no header", "POST", "/v1/execute", `{"owner":"o","code":"1"}`, "", 200, ""},
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
	}}}
	defer c.CloseIdleConnections()
	for _, tc := range cases {
		req, err := http.NewRequest(tc.method, "http://kernpool"+tc.path, bytes.NewBufferString(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if tc.gen != "" {
			req.Header.Set(api.HeaderOwnerGeneration, tc.gen)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var eb api.ErrorBody
		_ = json.Unmarshal(raw, &eb)
		if resp.StatusCode != tc.status || eb.Code != tc.code {
			t.Fatalf("%s: %d %q (%s), want %d %q", tc.name, resp.StatusCode, eb.Code, raw, tc.status, tc.code)
		}
	}
}

// With the fleet's placement records (ServerConfig.Placement), a routed
// request runs only when its generation is the record's and the record
// names this node: otherwise 409 fenced, and 503 no_node (retry) when
// the record cannot be read.
func TestOwnerGenerationAgainstPlacement(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	type record struct {
		gen  uint64
		here bool
		err  error
	}
	records := map[string]record{
		"current": {5, true, nil}, "older": {5, true, nil}, "newer": {5, true, nil},
		"elsewhere": {5, false, nil}, "unreadable": {0, false, errors.New("registry down")},
	}
	srv := api.NewServer(d.pool, api.ServerConfig{Placement: func(_ context.Context, owner string) (uint64, bool, error) {
		r := records[owner]
		return r.gen, r.here, r.err
	}})
	for _, tc := range []struct {
		owner, gen string
		status     int
		code       string
	}{
		{"current", "5", http.StatusOK, ""},
		{"older", "4", http.StatusConflict, api.CodeFenced},
		{"newer", "6", http.StatusConflict, api.CodeFenced},
		{"elsewhere", "5", http.StatusConflict, api.CodeFenced},
		{"unreadable", "5", http.StatusServiceUnavailable, api.CodeNoNode},
	} {
		status, code, retry := executeAs(t, srv, `{"owner":"`+tc.owner+`","code":"1"}`, tc.gen)
		if status != tc.status || code != tc.code || (retry != "") != (status == http.StatusServiceUnavailable) {
			t.Errorf("%s at generation %s: %d %q Retry-After %q, want %d %q", tc.owner, tc.gen, status, code, retry, tc.status, tc.code)
		}
	}
}
