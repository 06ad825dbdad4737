package pool

import (
	"context"
	"errors"
	"maps"
	"os"
	"testing"
)

// The observer's event of a cell counts its tool calls by name and by
// outcome (an error of the handler is "error", a result "ok"), and says
// -1 redactions when the pool's filter does not count them (no Output
// factory: text passes unchanged); without a sandbox the cell ran as
// the daemon's uid, which the event names.
func TestCellEventCountsToolOutcomes(t *testing.T) {
	rec := newRecorder()
	tools := fakeToolFactory{rec: &toolRecorder{}}
	p := newTestPool(t, func(c *Config) { c.Tools = tools; c.Observer = rec })
	handler := ToolHandlerFunc(func(_ context.Context, call ToolCall) (string, error) {
		if call.Tool == "bad" {
			return "", errors.New("refused")
		}
		return "r", nil
	})
	b := startBlocker(t, p, context.Background(), Request{Tools: []string{"good", "bad"}, ToolHandler: handler})
	srv := tools.last()
	srv.mu.Lock()
	h := srv.handlers[0] // what the cell's calls go through
	srv.mu.Unlock()
	for _, name := range []string{"good", "bad", "good"} {
		if _, err := h.HandleTool(t.Context(), ToolCall{Tool: name}); (err != nil) != (name == "bad") {
			t.Fatalf("call of %s: %v", name, err)
		}
	}
	b.let(t)
	res := b.wait(t)
	wantStatus(t, res, StatusSuccess)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.cells) != 1 {
		t.Fatalf("%d cell events, want 1", len(rec.cells))
	}
	ev := rec.cells[0]
	if !maps.Equal(ev.ToolCalls, map[string]int{"good": 2, "bad": 1}) ||
		!maps.Equal(ev.ToolOutcomes, map[ToolOutcome]int{ToolOK: 2, ToolError: 1}) || ev.Redactions != -1 {
		t.Fatalf("cell event: tool calls %v, outcomes %v, redactions %d; want good 2 bad 1, ok 2 error 1, -1",
			ev.ToolCalls, ev.ToolOutcomes, ev.Redactions)
	}
	if ev.KernelID != res.Kernel.ID || ev.UID != os.Getuid() {
		t.Fatalf("cell event: kernel %q uid %d, want %q and the daemon's uid %d", ev.KernelID, ev.UID, res.Kernel.ID, os.Getuid())
	}
}
