package pool_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/rpcsock"
)

// A result carries stdout and stderr apart and the exception structured;
// a secret of the daemon's environment is masked in each of those fields
// (the exception's class name included: a cell can name a class anything).
func TestExceptionAndStreamsRedacted(t *testing.T) {
	testenv.RequirePython(t)
	const secret = "s3cr3t-value-0123456789"
	parent := []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "SERVICE_PASSWORD=" + secret}
	scrub, err := envscrub.New(envscrub.Config{Parent: func() []string { return parent }})
	if err != nil {
		t.Fatal(err)
	}
	p := newTestPool(t, func(c *pool.Config) {
		c.Env = scrub
		c.Output = envscrub.NewPipeline(envscrub.OutputConfig{InlineCap: 1000, StderrCap: 1000, SpillCap: 100000})
	})
	s := "'" + secret + "'"
	res := run(t, p, pool.Request{Code: "import sys\nprint('out', " + s + ")\nprint('err', " + s + ", file=sys.stderr)\n" +
		"E = type('E_' + " + s + ", (Exception,), {})\ndef f():\n    raise E(" + s + ")\nf()"})
	wantStatus(t, res, pool.StatusError)
	e := res.Exception
	if e == nil || res.Stdout != "out ***\n" || res.Stderr != "err ***\n" {
		t.Fatalf("stdout %q stderr %q exception %+v", res.Stdout, res.Stderr, e)
	}
	if e.EValue != "***" || !strings.HasPrefix(e.EName, "E_") || len(e.Traceback) != 4 {
		t.Fatalf("exception %+v", e)
	}
	fields := append([]string{res.Output, res.Error, res.Stdout, res.Stderr, e.EName, e.EValue}, e.Traceback...)
	for _, f := range fields {
		if strings.Contains(f, secret) {
			t.Errorf("secret shows in %q", f)
		}
	}
	if !strings.Contains(e.Traceback[2], "in f\n") || !strings.HasSuffix(res.Output, strings.Join(e.Traceback, "")) {
		t.Errorf("traceback entries %q do not end the output %q", e.Traceback, res.Output)
	}
	res = run(t, p, pool.Request{Code: "print('fine')"})
	if res.Exception != nil || res.Stdout != "fine\n" || res.Stderr != "" {
		t.Fatalf("a quiet success: %+v", res)
	}
}

// A failed tool call raises ToolError in the cell: the tenant sees the
// cell's frame and the tool's message, never the stub's frames or the
// kernel's staging path.
func TestToolErrorTraceback(t *testing.T) {
	p := newTestPool(t, func(c *pool.Config) { c.Tools = rpcsock.Factory{} })
	failing := pool.ToolHandlerFunc(func(context.Context, pool.ToolCall) (string, error) {
		return "", errors.New("search backend down")
	})
	res := run(t, p, pool.Request{Owner: "tools", Tools: []string{"search"}, ToolHandler: failing, Code: "import kernpool_tools\nkernpool_tools.search(q=1)"})
	wantStatus(t, res, pool.StatusError)
	e := res.Exception
	if e == nil || e.EName != "ToolError" || !strings.Contains(e.EValue, "search backend down") {
		t.Fatalf("exception %+v", e)
	}
	staging := filepath.Join(pool.StateDirOf(p), "kernels", res.Kernel.ID)
	for _, f := range append([]string{res.Output, res.Error, e.EValue}, e.Traceback...) {
		for _, bad := range []string{"kernpool_tools.py", "runner.py", staging} {
			if strings.Contains(f, bad) {
				t.Errorf("%q shows %q", f, bad)
			}
		}
	}
	if want := "  File \"<cell-1>\", line 2, in <module>\n    kernpool_tools.search(q=1)\n"; len(e.Traceback) != 3 || e.Traceback[1] != want {
		t.Errorf("traceback %q, want the cell's one frame %q", e.Traceback, want)
	}
}

// A 4 MB exception message reaches the result capped like stderr in each
// part, and the whole result stays small.
func TestHugeExceptionResultBounded(t *testing.T) {
	testenv.RequirePython(t)
	p := newTestPool(t, func(c *pool.Config) { c.Output = envscrub.NewPipeline(envscrub.OutputConfig{}) })
	res := run(t, p, pool.Request{Code: "raise ValueError('é' * (2 << 20))"})
	wantStatus(t, res, pool.StatusError)
	e := res.Exception
	if e == nil || e.EName != "ValueError" {
		t.Fatalf("exception %+v", e)
	}
	const most = envscrub.DefaultStderrCap + 128 // the cap plus its notice
	parts := append([]string{res.Error, e.EValue}, e.Traceback...)
	for _, part := range parts {
		if len(part) > most {
			t.Errorf("a part of %d bytes, want at most %d", len(part), most)
		}
	}
	if len(e.EValue) < envscrub.DefaultStderrCap/2 || !strings.Contains(e.EValue, "bytes omitted out of") {
		t.Errorf("evalue %d bytes without the truncation notice", len(e.EValue))
	}
	body, err := json.Marshal(res)
	if err != nil || len(body) > 100_000 {
		t.Fatalf("result JSON %d bytes (%v), want under 100,000", len(body), err)
	}
	t.Logf("result JSON of a 4 MB exception: %d bytes", len(body))
}
