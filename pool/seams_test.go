package pool

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestToolServerWiring(t *testing.T) {
	tools := fakeToolFactory{rec: &toolRecorder{}}
	secrets := &secretRecorder{}
	p := newTestPool(t, killOnTimeout, func(c *Config) { c.Tools = tools; c.Output = maskFactory{secrets}; c.MaxToolCalls = 9 })
	handler := ToolHandlerFunc(func(context.Context, ToolCall) (string, error) { return "r", nil })
	code := `import os, kernpool_tools, _kernpool_runtime as rt
print(kernpool_tools.TOOLS)
print(rt.rpc_endpoint)
print(rt.rpc_token)
print(sorted(k for k in os.environ if k.startswith('KERNPOOL_RPC')))`
	res := run(t, p, Request{Tools: []string{"b", "a", "b"}, Code: code, MaxToolCalls: 7, ToolHandler: handler})
	wantStatus(t, res, StatusSuccess)
	srv := tools.last()
	srv.mu.Lock()
	srv.report = 3
	srv.mu.Unlock()
	want := "['a', 'b']\n" + srv.endpoint + "\n[MASKED]\n[]\n"
	if res.Output != want {
		t.Fatalf("output = %q, want %q (stub, endpoint, masked token, no RPC env)", res.Output, want)
	}
	if filepath.Dir(srv.endpoint) != srv.staging || !slices.Equal(srv.tools, []string{"a", "b"}) {
		t.Fatalf("listener staging %q endpoint %q tools %v", srv.staging, srv.endpoint, srv.tools)
	}
	if uid := tools.rec.uids[0]; uid != -1 {
		t.Fatalf("Listen uid = %d, want -1 without a sandbox", uid)
	}
	if !slices.Contains(secrets.secrets[0], srv.token) {
		t.Fatalf("filter secrets %q lack the RPC token", secrets.secrets[0])
	}
	// The second cell: no handler (refusing one installed), default budget.
	res = run(t, p, Request{Tools: []string{"a", "b"}, Code: "pass"})
	if res.ToolCallsMade != 3 || !res.Kernel.Reused {
		t.Fatalf("second cell = %+v", res)
	}
	srv.mu.Lock()
	budgets, handlers := slices.Clone(srv.budgets), slices.Clone(srv.handlers)
	srv.mu.Unlock()
	if !slices.Equal(budgets, []int{7, 9}) {
		t.Fatalf("budgets = %v, want [7 9]", budgets)
	}
	if _, err := handlers[1].HandleTool(t.Context(), ToolCall{Tool: "a"}); !errors.Is(err, errNoToolHandler) {
		t.Fatalf("default handler = %v", err)
	}
	if r, _ := handlers[0].HandleTool(t.Context(), ToolCall{}); r != "r" {
		t.Fatalf("the request's handler was not installed")
	}
	// A timeout still retires the cell's authority, and teardown closes the server.
	res = run(t, p, Request{Tools: []string{"a", "b"}, Code: "import time; time.sleep(30)", Timeout: 200 * time.Millisecond})
	wantStatus(t, res, StatusTimeout)
	if begun, ended, closed := srv.counts(); begun != 3 || ended != 3 || closed != 1 {
		t.Fatalf("begun %d ended %d closed %d, want 3 3 1", begun, ended, closed)
	}
}
