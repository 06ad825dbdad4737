//go:build unix

package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// A listing whose repr loops, on the kernel's endpoint or the session's,
// is stopped by an interrupt (of the kernel, of the session) or by its
// client going away. An interrupt is answered 409 interrupted, which the
// client maps to pool.ErrInterrupted; a gone client's listing is logged
// as a disconnect. Neither is logged as a failure of the daemon, and the
// kernel keeps its state.
func TestVariablesInterruptedOrClientGone(t *testing.T) {
	const disconnect = "client disconnected; its variables listing was interrupted"
	for _, session := range []bool{false, true} {
		for _, gone := range []bool{false, true} {
			t.Run(fmt.Sprintf("session %v client gone %v", session, gone), func(t *testing.T) {
				var logs testenv.SyncBuffer
				d := startDaemon(t, daemonOpts{server: func(c *api.ServerConfig) {
					c.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
				}})
				ctx, c := testCtx(t), d.client
				s, err := c.CreateSession(ctx, pool.SessionSpec{Owner: "v"})
				if err != nil {
					t.Fatal(err)
				}
				runs := filepath.Join(shortTempDir(t), "repr-runs")
				res, err := c.Execute(ctx, pool.Request{Session: s.ID, Code: fmt.Sprintf("x = 41\nclass A:\n def __repr__(self):\n"+
					"  open(%q, 'w').close()\n  while True: pass\na = A()", runs)})
				if err != nil || res.Status != pool.StatusSuccess {
					t.Fatalf("execute: %+v, %v", res, err)
				}
				kid := res.Kernel.ID
				lctx, cancel := context.WithCancel(ctx)
				defer cancel()
				errc := make(chan error, 1)
				go func() {
					var err error
					if session {
						_, err = c.SessionVariables(lctx, s.ID)
					} else {
						_, err = c.Variables(lctx, kid)
					}
					errc <- err
				}()
				waitFor(t, "the listing's repr to run", func() bool { _, err := os.Stat(runs); return err == nil })
				switch {
				case gone:
					cancel()
				case session:
					err = c.InterruptSession(ctx, s.ID)
				default:
					err = c.Interrupt(ctx, kid)
				}
				if err != nil {
					t.Fatalf("interrupt during the listing: %v", err)
				}
				err = recv(t, "the listing to return", errc)
				if gone {
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("canceled listing: %v, want context.Canceled", err)
					}
					// The handler logs once the listing ended; an error
					// line instead would be the failure this checks.
					waitFor(t, "the listing's end to be logged", func() bool {
						l := logs.String()
						return strings.Contains(l, disconnect) || strings.Contains(l, "[ERROR]")
					})
				} else {
					var ae *api.APIError
					if !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict || ae.Code != api.CodeInterrupted ||
						!errors.Is(err, pool.ErrInterrupted) || !strings.Contains(ae.Message, "keeps its state") {
						t.Fatalf("interrupted listing: %v; want 409 interrupted (pool.ErrInterrupted) saying the kernel keeps its state", err)
					}
				}
				next, err := c.Execute(ctx, pool.Request{Session: s.ID, Code: "del a, A\nx += 1\nprint(x)"})
				if err != nil || next.Output != "42\n" || next.Kernel.ID != kid || !next.Kernel.Reused {
					t.Fatalf("after the stopped listing: %+v, %v; want x kept in kernel %s", next, err, kid)
				}
				l := logs.String()
				if strings.Contains(l, "[ERROR]") {
					t.Fatalf("the daemon logged a failure: %q", l)
				}
				if n := strings.Count(l, disconnect); gone && (n != 1 || !strings.Contains(l, "kernel="+kid)) || !gone && n != 0 {
					t.Fatalf("logs %q: want %v disconnect lines of kernel %s", l, gone, kid)
				}
			})
		}
	}
}

// A repr that ignores the interrupt outlives its grace and the kernel is
// killed: still 409 interrupted (as a deadline's kill stays 504 timeout),
// its message saying the kernel was killed, and no failure of the daemon
// logged (the tenant's code did it). The owner's next cell gets a new
// kernel.
func TestVariablesKilledAfterInterrupt(t *testing.T) {
	var logs testenv.SyncBuffer
	d := startDaemon(t, daemonOpts{server: func(c *api.ServerConfig) {
		c.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	}})
	ctx, c := testCtx(t), d.client
	runs := filepath.Join(shortTempDir(t), "repr-runs")
	res, err := c.Execute(ctx, pool.Request{Owner: "v", Code: fmt.Sprintf("import signal\nclass A:\n def __repr__(self):\n"+
		"  signal.signal(signal.SIGINT, signal.SIG_IGN)\n  open(%q, 'w').close()\n  while True: pass\na = A()", runs)})
	if err != nil || res.Status != pool.StatusSuccess {
		t.Fatalf("execute: %+v, %v", res, err)
	}
	kid := res.Kernel.ID
	errc := make(chan error, 1)
	go func() {
		_, err := c.Variables(ctx, kid)
		errc <- err
	}()
	waitFor(t, "the listing's repr to run", func() bool { _, err := os.Stat(runs); return err == nil })
	if err := c.Interrupt(ctx, kid); err != nil {
		t.Fatalf("interrupt during the listing: %v", err)
	}
	err = recv(t, "the listing to return", errc)
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict || ae.Code != api.CodeInterrupted ||
		!errors.Is(err, pool.ErrInterrupted) || !strings.Contains(ae.Message, "the kernel was killed and its state is lost") {
		t.Fatalf("listing whose repr ignored the interrupt: %v; want 409 interrupted saying the kernel was killed", err)
	}
	if l := logs.String(); strings.Contains(l, "[ERROR]") {
		t.Fatalf("the daemon logged a failure: %q", l)
	}
	next, err := c.Execute(ctx, pool.Request{Owner: "v", Code: "print('a' in dir())"})
	if err != nil || next.Output != "False\n" || next.Kernel.ID == kid {
		t.Fatalf("after the killed listing: %+v, %v; want a new kernel without a", next, err)
	}
}
