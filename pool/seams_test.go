package pool

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestToolServerWiring(t *testing.T) {
	tools := fakeToolFactory{rec: &toolRecorder{}}
	secrets := &secretRecorder{}
	p := newTestPool(t, func(c *Config) { c.Tools = tools; c.Output = maskFactory{secrets}; c.MaxToolCalls = 9 })
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

func TestEnvAndOutputWiring(t *testing.T) {
	const secret = "s3cr3t-value-0123456789"
	secrets := &secretRecorder{}
	p := newTestPool(t, func(c *Config) { c.Env = fakeEnv{secret}; c.Output = maskFactory{secrets} })
	res := run(t, p, Request{Mode: "m", Code: "import os\nprint(os.environ['KP_VISIBLE'])\nprint('" + secret + "')"})
	wantStatus(t, res, StatusSuccess)
	if res.Output != "mode-m\n[MASKED]\n" {
		t.Fatalf("output = %q", res.Output)
	}
	res = run(t, p, Request{Mode: "m", Code: "raise ValueError('" + secret + "')"})
	wantStatus(t, res, StatusError)
	if strings.Contains(res.Error, secret) || strings.Contains(res.Output, secret) || !strings.Contains(res.Error, "[MASKED]") {
		t.Fatalf("traceback not cleaned: %+v", res)
	}
	if _, err := p.Execute(t.Context(), Request{Owner: "x", Passthrough: []string{"REFUSED"}, Code: "pass"}); !errors.Is(err, ErrBadRequest) || !errors.Is(err, errRefused) {
		t.Fatalf("refused passthrough = %v, want ErrBadRequest wrapping the builder's error", err)
	}
	// Output over the (fake) inline cap spills into the daemon's spill dir
	// of the kernel, never inside its staging dir (which the kernel owns).
	res = run(t, p, Request{Mode: "m", Code: "print('y' * 500)"})
	if !res.StdoutTruncated || res.StdoutSpillPath == "" || res.Warning == "" || len(res.Output) != 100 {
		t.Fatalf("spill result = %+v", res)
	}
	spillDir := filepath.Join(p.cfg.StateDir, "spill", res.Kernel.ID)
	if filepath.Dir(res.StdoutSpillPath) != spillDir || res.StdoutSpillName != "cell_000003_stdout.txt" {
		t.Fatalf("spill path %s (name %q) is not %s/cell_000003_stdout.txt", res.StdoutSpillPath, res.StdoutSpillName, spillDir)
	}
	if b, err := os.ReadFile(res.StdoutSpillPath); err != nil || len(b) != 501 {
		t.Fatalf("spill file: %d bytes, %v", len(b), err)
	}
	if len(p.List()) != 1 {
		t.Fatalf("kernels = %+v", p.List())
	}
}
