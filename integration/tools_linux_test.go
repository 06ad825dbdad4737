//go:build integration && linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolRPCWithCLIHandler: a cell's tool call travels kernel -> rpc
// socket -> daemon -> `kernpool exec --tool-handler` -> sh -c handler and
// back; the budget is counted; a tool outside the set is refused.
func TestToolRPCWithCLIHandler(t *testing.T) {
	requireDaemon(t)
	d := StartDaemon(t, capped())
	handler := filepath.Join(d.Base, "handler.sh")
	// The handler echoes the call it got (JSON on stdin) as its result.
	script := "#!/bin/sh\nprintf 'handled:'\ncat\n"
	if err := os.WriteFile(handler, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	code := `
import kernpool_tools
r = kernpool_tools.call("echo", {"x": 41})
print("R1", r)
try:
    kernpool_tools.call("rm_rf", {})
    print("R2 allowed")
except kernpool_tools.ToolError as e:
    print("R2 refused", e)
`
	res, rc := d.Exec(t, "tooler", code, "--tools", "echo", "--tool-handler", handler, "--timeout", "60s")
	if rc != 0 || res.Status != "success" {
		t.Fatalf("exec with tool handler: rc %d %+v", rc, res)
	}
	if !strings.Contains(res.Output, `R1 handled:`) || !strings.Contains(res.Output, `"tool":"echo"`) || !strings.Contains(res.Output, `"x":41`) {
		t.Errorf("tool round trip lost the call: %q", res.Output)
	}
	if !strings.Contains(res.Output, "R2 refused") || !strings.Contains(res.Output, "echo") {
		t.Errorf("a tool outside the set was not refused naming the available ones: %q", res.Output)
	}
	if res.ToolCallsMade != 1 {
		t.Errorf("tool_calls_made = %d, want 1 (refusals do not count)", res.ToolCallsMade)
	}
	// Without a handler the same kernel's call is refused, not hung.
	res2, _ := d.Exec(t, "tooler", `
import kernpool_tools
try:
    kernpool_tools.call("echo", {"x": 1}); print("allowed")
except kernpool_tools.ToolError as e:
    print("refused", e)`, "--tools", "echo", "--timeout", "60s")
	if !strings.Contains(res2.Output, "refused") {
		t.Errorf("a call with no handler was not refused: %q", res2.Output)
	}
	shutdownAndCheck(t, d, "tooler")
}
