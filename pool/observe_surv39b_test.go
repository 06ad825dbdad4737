package pool

import (
	"context"
	"errors"
	"maps"
	"os"
	"testing"
)

// A cell's observer event counts its tool calls by name and by outcome
// (a handler's error is "error", a result "ok"), its output (stdout and
// stderr) and what its spill file holds; it says -1 redactions when the
// pool's filter counts none, and names the uid the cell ran as (the
// daemon's, without a sandbox).
func TestCellEventCountsToolOutcomes(t *testing.T) {
	rec := newRecorder()
	tools := fakeToolFactory{rec: &toolRecorder{}}
	// maskFilter spills a stdout over 100 bytes and counts no redactions.
	p := newTestPool(t, func(c *Config) { c.Tools = tools; c.Observer = rec; c.Output = maskFactory{&secretRecorder{}} })
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
	// A second cell on the kernel: 301 bytes of stdout (spilled whole),
	// 3 of stderr.
	wantStatus(t, run(t, p, Request{Tools: []string{"good", "bad"}, Code: "import sys; print('x' * 300); print('de', file=sys.stderr)"}), StatusSuccess)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.cells) != 2 {
		t.Fatalf("%d cell events, want 2", len(rec.cells))
	}
	if ev := rec.cells[1]; ev.OutputBytes != 304 || ev.SpillBytes != 301 {
		t.Errorf("second cell's event: output %d bytes, spill %d; want 304, 301", ev.OutputBytes, ev.SpillBytes)
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
