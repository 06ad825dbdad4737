package pool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/rpcsock"
)

// Parity §6: a later cell's tool call runs under that cell's authority; a
// settled cell's authority refuses dispatch.
func TestToolCallsUnderEachCellsAuthority(t *testing.T) {
	p := newTestPool(t, func(c *pool.Config) { c.Tools = rpcsock.Factory{} })
	var firstCalls, secondCalls atomic.Int32
	handler := func(n *atomic.Int32, tag string) pool.ToolHandler {
		return pool.ToolHandlerFunc(func(_ context.Context, c pool.ToolCall) (string, error) {
			n.Add(1)
			var args map[string]any
			if err := json.Unmarshal(c.Args, &args); err != nil {
				return "", err
			}
			return fmt.Sprintf("%s:%s:%v", tag, c.Tool, args["q"]), nil
		})
	}
	dir := testTempDir(t)
	late := filepath.Join(dir, "late.txt")
	code := fmt.Sprintf(`import kernpool_tools, threading, time
print(kernpool_tools.search(q="one"))
go = threading.Event()
def later():
    go.wait()
    try:
        r = kernpool_tools.search(q="late")
    except kernpool_tools.ToolError as e:
        r = "refused: " + str(e)
    open(%q, "w").write(r)
bg = threading.Thread(target=later, daemon=True)
bg.start()`, late)
	req := pool.Request{Owner: "tools", Tools: []string{"search"}, Code: code, ToolHandler: handler(&firstCalls, "first")}
	res := run(t, p, req)
	wantStatus(t, res, pool.StatusSuccess)
	if res.Output != "first:search:one\n" || res.ToolCallsMade != 1 {
		t.Fatalf("first cell = %+v", res)
	}
	// The first cell has settled; its background call must not reach it.
	res = run(t, p, pool.Request{Owner: "tools", Tools: []string{"search"}, ToolHandler: handler(&secondCalls, "second"),
		Code: "go.set(); bg.join(10)\nprint(open(" + fmt.Sprintf("%q", late) + ").read())\nprint(kernpool_tools.search(q='two'))"})
	wantStatus(t, res, pool.StatusSuccess)
	lines := strings.Split(strings.TrimSpace(res.Output), "\n")
	if len(lines) != 2 || lines[1] != "second:search:two" {
		t.Fatalf("second cell output = %q", res.Output)
	}
	// The background thread's call ran during the second cell: it is that
	// cell's authority (the reference's alias case), never the first's.
	if firstCalls.Load() != 1 {
		t.Fatalf("the settled first cell dispatched %d calls, want 1", firstCalls.Load())
	}
	if lines[0] != "second:search:late" || res.ToolCallsMade != 2 || secondCalls.Load() != 2 {
		t.Fatalf("late call = %q, calls %d/%d", lines[0], res.ToolCallsMade, secondCalls.Load())
	}
	// Between cells nothing is authorized.
	res = run(t, p, pool.Request{Owner: "tools", Tools: []string{"search"}, Code: `import threading
def between():
    time.sleep(0.2)
    try:
        kernpool_tools.search(q="between")
        r = "dispatched"
    except kernpool_tools.ToolError as e:
        r = "refused: " + str(e)
    open(` + fmt.Sprintf("%q", late) + `, "w").write(r)
threading.Thread(target=between, daemon=True).start()`})
	wantStatus(t, res, pool.StatusSuccess)
	waitFor(t, "the between-cells call", func() bool {
		b, err := os.ReadFile(late)
		return err == nil && strings.HasPrefix(string(b), "refused") || err == nil && string(b) == "dispatched"
	})
	if b, _ := os.ReadFile(late); !strings.Contains(string(b), "No active cell") {
		t.Fatalf("between-cells call = %q, want refused with No active cell", b)
	}
	// A request without a handler gets refusals.
	res = run(t, p, pool.Request{Owner: "tools", Tools: []string{"search"}, Code: `try:
    kernpool_tools.search(q="x")
except kernpool_tools.ToolError as e:
    print("refused:", e)`})
	if !strings.Contains(res.Output, pool.ErrNoToolHandler.Error()) {
		t.Fatalf("no-handler cell = %q", res.Output)
	}
}
