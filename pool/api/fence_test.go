//go:build unix

package api_test

import (
	"bytes"
	"context"
	"encoding/json"
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
