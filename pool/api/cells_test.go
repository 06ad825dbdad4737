//go:build unix

package api_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// liveLog records a streamed cell's events; first fires at the first one.
type liveLog struct {
	mu     sync.Mutex
	events []api.Event
	first  chan struct{}
}

func newLiveLog() *liveLog { return &liveLog{first: make(chan struct{})} }

func (l *liveLog) add(e api.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == 0 {
		close(l.first)
	}
	l.events = append(l.events, e)
}

// Output events arrive while the cell runs, then the result.
func TestStreamOutputEvents(t *testing.T) {
	ctx := testCtx(t)
	d := startDaemon(t, daemonOpts{})
	gate := shortTempDir(t) + "/go"
	log := newLiveLog()
	code := "import os, sys, time\nprint('a')\nwhile not os.path.exists(" + quotePy(gate) + "): time.sleep(0.01)\n" +
		"print('b')\nprint('oops', file=sys.stderr)\ndisplay(type('H', (), {'_repr_html_': lambda self: '<p>x</p>'})())"
	done := make(chan *pool.Result, 1)
	go func() {
		res, err := d.client.ExecuteLive(ctx, pool.Request{Code: code}, nil, log.add)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	recv(t, "the first event", log.first)
	select {
	case <-done:
		t.Fatal("the result came before the gate opened")
	default:
	}
	if err := writeEmpty(gate); err != nil {
		t.Fatal(err)
	}
	res := recv(t, "the result", done)
	var out, errs strings.Builder
	displays := 0
	for _, e := range log.events {
		switch e.Event {
		case api.EventStdout:
			out.WriteString(e.Text)
		case api.EventStderr:
			errs.WriteString(e.Text)
		case api.EventDisplay:
			displays++
		}
	}
	if out.String() != "a\nb\n" || errs.String() != "oops\n" || displays != 1 || len(res.Displays) != 1 {
		t.Fatalf("stdout %q stderr %q displays %d/%d", out.String(), errs.String(), displays, len(res.Displays))
	}
}

func TestInterruptByAPI(t *testing.T) {
	ctx := testCtx(t)
	d := startDaemon(t, daemonOpts{})
	warm := d.exec(t, "i", "x = 1")
	id := warm.Kernel.ID
	if err := d.client.Interrupt(ctx, id); !errors.Is(err, pool.ErrIdle) {
		t.Fatalf("idle interrupt = %v, want pool.ErrIdle (409)", err)
	}
	d.expect(t, "POST", "/v1/kernels/nope/interrupt", "", 404, api.CodeNotFound, nil)
	for _, byOwner := range []bool{false, true} {
		log := newLiveLog()
		done := make(chan *pool.Result, 1)
		go func() {
			res, err := d.client.ExecuteLive(ctx, pool.Request{Owner: "i", Code: "import time\nx += 1\nprint('go', flush=True)\ntime.sleep(60)"}, nil, log.add)
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		recv(t, "the cell to start", log.first)
		if _, err := d.client.Variables(ctx, id); !errors.Is(err, pool.ErrBusy) {
			t.Fatalf("variables while busy = %v, want pool.ErrBusy (409)", err)
		}
		if byOwner {
			ids, err := d.client.InterruptOwner(ctx, "i", "")
			if err != nil || len(ids) != 1 || ids[0] != id {
				t.Fatalf("owner interrupt = %v, %v", ids, err)
			}
		} else if err := d.client.Interrupt(ctx, id); err != nil {
			t.Fatal(err)
		}
		res := recv(t, "the interrupted result", done)
		if res.Status != pool.StatusInterrupted || !res.Kernel.StatePreserved {
			t.Fatalf("interrupted result %+v", res)
		}
	}
	v, err := d.client.Variables(ctx, id)
	if err != nil || len(v.Variables) != 2 || v.Variables[1].Name != "x" || v.Variables[1].Repr != "3" {
		t.Fatalf("variables %+v, %v", v, err)
	}
}

// A variables listing waits for a slow repr (up to its own 10 s bound),
// longer than an interrupt's default grace (2 s), after which a listing
// bound at once would have killed the kernel.
func TestVariablesWaitForASlowRepr(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	res := d.exec(t, "v", "import time\nclass Slow:\n    def __repr__(self):\n        time.sleep(3)\n        return 'slow'\ns = Slow()")
	v, err := d.client.Variables(testCtx(t), res.Kernel.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range v.Variables {
		if e.Name == "s" && e.Repr == "slow" {
			return
		}
	}
	t.Fatalf("variables %+v: want s listed as slow", v)
}

// An interrupt while the cell waits on a tool call leaves a working kernel.
func TestInterruptDuringToolCall(t *testing.T) {
	ctx := testCtx(t)
	d := startDaemon(t, daemonOpts{})
	inCall := make(chan struct{})
	h := pool.ToolHandlerFunc(func(hctx context.Context, call pool.ToolCall) (string, error) {
		close(inCall)
		<-hctx.Done() // never answers: the interrupt must end the cell
		return "", hctx.Err()
	})
	done := make(chan *pool.Result, 1)
	go func() {
		res, err := d.client.ExecuteStream(ctx, pool.Request{Owner: "t", Tools: []string{"slow"}, Code: "import kernpool_tools as t\nt.slow()"}, h)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	recv(t, "the tool call", inCall)
	ks, _ := d.client.List(ctx)
	if err := d.client.Interrupt(ctx, ks[0].ID); err != nil {
		t.Fatal(err)
	}
	res := recv(t, "the interrupted result", done)
	if res.Status != pool.StatusInterrupted || !res.Kernel.StatePreserved || !strings.Contains(res.Output, "KeyboardInterrupt") {
		t.Fatalf("result %+v", res)
	}
	next, err := d.client.ExecuteStream(ctx, pool.Request{Owner: "t", Tools: []string{"slow"}, Code: "print(2 + 2)"}, nil)
	if err != nil || next.Output != "4\n" || !next.Kernel.Reused {
		t.Fatalf("after the interrupt: %+v, %v", next, err)
	}
}

func quotePy(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

func writeEmpty(path string) error { return os.WriteFile(path, nil, 0o600) }
