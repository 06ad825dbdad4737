//go:build unix

package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

func TestStreamToolCallRoundTrip(t *testing.T) {
	ctx := testCtx(t)
	d := startDaemon(t, daemonOpts{})
	var seen atomic.Int32
	h := pool.ToolHandlerFunc(func(_ context.Context, call pool.ToolCall) (string, error) {
		seen.Add(1)
		var args struct{ Text string }
		if err := json.Unmarshal(call.Args, &args); err != nil {
			return "", err
		}
		if call.Tool == "fail" {
			return "", errors.New("no luck for " + args.Text)
		}
		return "pong:" + args.Text, nil
	})
	code := `import kernpool_tools as t
print(t.echo(text="hi"))
try:
    t.fail(text="you")
except t.ToolError as e:
    print("error:", e)
`
	res, err := d.client.ExecuteStream(ctx, pool.Request{Tools: []string{"echo", "fail"}, Code: code}, h)
	if err != nil {
		t.Fatalf("ExecuteStream: %v", err)
	}
	if res.Status != pool.StatusSuccess || res.Output != "pong:hi\nerror: no luck for you\n" {
		t.Fatalf("result: status %s, output %q, error %q", res.Status, res.Output, res.Error)
	}
	if res.ToolCallsMade != 2 || seen.Load() != 2 {
		t.Fatalf("tool_calls_made %d, handler saw %d; want 2", res.ToolCallsMade, seen.Load())
	}
	if h, _ := d.client.Health(ctx); h.PendingToolCalls != 0 {
		t.Fatalf("pending tool calls after the cell: %d", h.PendingToolCalls)
	}
}

func TestStreamWithoutToolCallsAndErrors(t *testing.T) {
	ctx := testCtx(t)
	d := startDaemon(t, daemonOpts{})
	res, err := d.client.ExecuteStream(ctx, pool.Request{Code: "print(6*7)"}, nil)
	if err != nil || res.Output != "42\n" {
		t.Fatalf("stream without tools = %+v, %v", res, err)
	}
	// A cell that sends no event before its result.
	if res, err := d.client.ExecuteStream(ctx, pool.Request{Code: "x = 1"}, nil); err != nil || res.Status != pool.StatusSuccess || res.Output != "" {
		t.Fatalf("silent stream = %+v, %v", res, err)
	}
	// A pool error before any event keeps its HTTP status.
	_, err = d.client.ExecuteStream(ctx, pool.Request{Code: "1", Interpreter: "rel/python"}, nil)
	var ae *api.APIError
	if !errors.Is(err, pool.ErrBadRequest) || !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad stream request = %v, want a 400 pool.ErrBadRequest", err)
	}
}

func TestToolCallsNeedStreaming(t *testing.T) {
	ctx := testCtx(t)
	d := startDaemon(t, daemonOpts{})
	code := `import kernpool_tools as t
try:
    t.echo(text="x")
except t.ToolError as e:
    print(e)
`
	res, err := d.client.Execute(ctx, pool.Request{Tools: []string{"echo"}, Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Output, "tool calls need a streaming execute request") {
		t.Fatalf("output %q does not explain the refusal", res.Output)
	}
}

func TestToolCallTimeout(t *testing.T) {
	ctx := testCtx(t)
	d := startDaemon(t, daemonOpts{server: func(c *api.ServerConfig) { c.ToolCallTimeout = 250 * time.Millisecond }})
	h := pool.ToolHandlerFunc(func(ctx context.Context, _ pool.ToolCall) (string, error) {
		<-ctx.Done() // never answers in time (the message names 250 ms to its last digit)
		return "", ctx.Err()
	})
	code := `import kernpool_tools as t
try:
    t.slow()
except t.ToolError as e:
    print(e)
`
	res, err := d.client.ExecuteStream(ctx, pool.Request{Tools: []string{"slow"}, Code: code}, h)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Tool call slow timed out after 0.25s"; !strings.Contains(res.Output, want) {
		t.Fatalf("output %q, want it to contain %q", res.Output, want)
	}
}

func TestToolAnswerByRawClient(t *testing.T) {
	ctx := testCtx(t)
	d := startDaemon(t, daemonOpts{})
	// A hand-written client: answer the call through AnswerToolCall, then
	// check that a second answer to the same id is refused.
	type manual struct {
		id  string
		err error
	}
	answered := make(chan manual, 1)
	h := pool.ToolHandlerFunc(func(hctx context.Context, call pool.ToolCall) (string, error) {
		// Post on the test's ctx, not hctx: the answer ends the cell, and the
		// client cancels hctx as soon as the result event arrives, which may
		// be before this POST's own response is read.
		result := "manual"
		err := d.client.AnswerToolCall(ctx, call.ID, api.ToolAnswer{Result: &result})
		answered <- manual{call.ID, err}
		<-hctx.Done() // the cell's end; the manual answer alone decides the call
		return "", hctx.Err()
	})
	res, err := d.client.ExecuteStream(ctx, pool.Request{Tools: []string{"echo"},
		Code: "import kernpool_tools as t\nprint(t.echo())"}, h)
	if err != nil || res.Output != "manual\n" {
		t.Fatalf("result %+v, %v", res, err)
	}
	m := recv(t, "the handler's manual answer", answered)
	if m.err != nil {
		t.Fatalf("manual answer: %v", m.err)
	}
	again := "late"
	err = d.client.AnswerToolCall(ctx, m.id, api.ToolAnswer{Result: &again})
	if !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("second answer = %v, want not found", err)
	}
}
