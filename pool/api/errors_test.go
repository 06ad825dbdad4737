//go:build unix

package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool/api"
)

func TestBadRequests(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	big := `{"code":"` + strings.Repeat("x", api.DefaultMaxBodyBytes) + `"}`
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
		wantInMsg                []string
	}{
		{"malformed JSON", "POST", "/v1/execute", `{"code": "1",}`, 400, api.CodeBadRequest, []string{"malformed JSON"}},
		{"truncated JSON", "POST", "/v1/execute", `{"code": "1"`, 400, api.CodeBadRequest, []string{"ends in the middle"}},
		{"empty body", "POST", "/v1/execute", ``, 400, api.CodeBadRequest, []string{"empty body"}},
		{"not an object", "POST", "/v1/execute", `[1,2]`, 400, api.CodeBadRequest, []string{"expected a JSON object", "array"}},
		{"unknown field", "POST", "/v1/execute", `{"code":"1","colour":"red"}`, 400, api.CodeBadRequest, []string{`"colour"`, "known fields", "owner"}},
		{"tools wrong type", "POST", "/v1/execute", `{"code":"1","tools":"a"}`, 400, api.CodeBadRequest, []string{`"tools"`, "array of strings", "string"}},
		{"reset wrong type", "POST", "/v1/execute", `{"code":"1","reset":"yes"}`, 400, api.CodeBadRequest, []string{`"reset"`, "boolean"}},
		{"limits field wrong type", "POST", "/v1/execute", `{"code":"1","limits":{"pids_max":"many"}}`, 400, api.CodeBadRequest, []string{`"limits.pids_max"`, "integer"}},
		{"code wrong type", "POST", "/v1/execute", `{"code":5}`, 400, api.CodeBadRequest, []string{`"code"`, "string", "number"}},
		{"timeout garbage", "POST", "/v1/execute", `{"code":"1","timeout":"soon"}`, 400, api.CodeBadRequest, []string{`"timeout"`, "duration"}},
		{"timeout wrong type", "POST", "/v1/execute", `{"code":"1","timeout":true}`, 400, api.CodeBadRequest, []string{`"timeout"`, "boolean"}},
		{"timeout negative", "POST", "/v1/execute", `{"code":"1","timeout":-3}`, 400, api.CodeBadRequest, []string{`"timeout"`, "negative"}},
		{"trailing data", "POST", "/v1/execute", `{"code":"1"} {"code":"2"}`, 400, api.CodeBadRequest, []string{"after the JSON object"}},
		{"body too large", "POST", "/v1/execute", big, 413, api.CodeTooLarge, []string{"exceeds 16777216 bytes"}},
		{"relative interpreter", "POST", "/v1/execute", `{"code":"1","interpreter":"python3"}`, 400, api.CodeBadRequest, []string{"interpreter"}},
		{"bad tool name", "POST", "/v1/execute", `{"code":"1","tools":["no such"]}`, 400, api.CodeBadRequest, []string{"tool"}},
		{"tool answer malformed", "POST", "/v1/tool-calls/t1", `{"result":`, 400, api.CodeBadRequest, []string{"ends in the middle"}},
		{"tool answer both", "POST", "/v1/tool-calls/t1", `{"result":"a","error":"b"}`, 400, api.CodeBadRequest, []string{"exactly one"}},
		{"tool answer neither", "POST", "/v1/tool-calls/t1", `{}`, 400, api.CodeBadRequest, []string{"exactly one"}},
		{"tool answer unknown id", "POST", "/v1/tool-calls/t1", `{"result":"a"}`, 404, api.CodeNotFound, []string{"t1"}},
		{"kill unknown", "DELETE", "/v1/kernels/knope", ``, 404, api.CodeNotFound, []string{"knope"}},
		{"unknown path", "GET", "/v1/nope", ``, 404, api.CodeNotFound, []string{"/v1/nope"}},
		{"root path", "GET", "/", ``, 404, api.CodeNotFound, []string{"no such endpoint"}},
		{"GET execute", "GET", "/v1/execute", ``, 405, api.CodeMethodNotAllowed, []string{"POST"}},
		{"POST kernels", "POST", "/v1/kernels", `{}`, 405, api.CodeMethodNotAllowed, []string{"GET"}},
		{"GET kill", "GET", "/v1/kernels/k1", ``, 405, api.CodeMethodNotAllowed, []string{"DELETE"}},
		{"GET shutdown", "GET", "/v1/owners/a/shutdown", ``, 405, api.CodeMethodNotAllowed, []string{"POST"}},
		{"DELETE health", "DELETE", "/v1/health", ``, 405, api.CodeMethodNotAllowed, []string{"GET"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, body := d.raw(t, tt.method, tt.path, tt.body)
			if status != tt.status || body.Code != tt.code {
				t.Fatalf("status %d code %q (%q), want %d %q", status, body.Code, body.Error, tt.status, tt.code)
			}
			for _, w := range tt.wantInMsg {
				if !strings.Contains(body.Error, w) {
					t.Errorf("error %q does not mention %q", body.Error, w)
				}
			}
			if status == http.StatusMethodNotAllowed && hdr.Get("Allow") == "" {
				t.Errorf("405 without an Allow header")
			}
		})
	}
	// Nothing of the bad requests reached a kernel.
	if ks := d.pool.List(); len(ks) != 0 {
		t.Fatalf("bad requests started kernels: %+v", ks)
	}
}
