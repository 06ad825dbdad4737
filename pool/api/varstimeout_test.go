//go:build unix

package api_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// A listing whose repr loops past the server's bound is interrupted and
// answered 504 timeout (docs/api.md), on the kernel's endpoint and on the
// session's; the kernel keeps its state: the next cell reuses it and a
// listing after the bad object is gone works.
func TestVariablesTimeoutIs504(t *testing.T) {
	d := startDaemon(t, daemonOpts{server: func(c *api.ServerConfig) { c.VariablesTimeout = time.Second }})
	ctx, c := testCtx(t), d.client
	s, err := c.CreateSession(ctx, pool.SessionSpec{Owner: "v"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Execute(ctx, pool.Request{Session: s.ID, Code: "x = 41\nclass Loop:\n    def __repr__(self):\n        while True:\n            pass\nbad = Loop()"})
	if err != nil || res.Status != pool.StatusSuccess {
		t.Fatalf("execute: %+v, %v", res, err)
	}
	d.expect(t, http.MethodGet, "/v1/kernels/"+res.Kernel.ID+"/variables", "", http.StatusGatewayTimeout, api.CodeTimedOut,
		[]string{"interrupted", "keeps its state"})
	_, err = c.SessionVariables(ctx, s.ID)
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusGatewayTimeout || !errors.Is(err, pool.ErrTimeout) {
		t.Fatalf("session variables: %v, want 504 timeout", err)
	}
	next, err := c.Execute(ctx, pool.Request{Session: s.ID, Code: "del bad, Loop\nx += 1\nprint(x)"})
	if err != nil || next.Output != "42\n" || next.Kernel.ID != res.Kernel.ID || !next.Kernel.Reused {
		t.Fatalf("after the timed-out listings: %+v, %v; want x kept in the same kernel", next, err)
	}
	v, err := c.Variables(ctx, res.Kernel.ID)
	if err != nil || v.Total != 1 || v.Variables[0].Name != "x" || v.Variables[0].Repr != "42" {
		t.Fatalf("listing after the bad object went: %+v, %v", v, err)
	}
}
