package pool_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/rpcsock"
)

// An implicit request whose tool set differs from the owner's live
// kernel's runs on a new kernel (the tool set is part of the key) and its
// result says so; the other kernel keeps its variables, a second call
// with the same tools reuses the new kernel without the note, and another
// owner's kernel with other tools is no reason for one.
func TestImplicitToolSetChangeIsNotSilent(t *testing.T) {
	p := newTestPool(t, func(c *pool.Config) { c.Tools = rpcsock.Factory{} })
	echo := pool.ToolHandlerFunc(func(_ context.Context, c pool.ToolCall) (string, error) { return "ok", nil })
	const note = "ran on a new kernel"

	plain := run(t, p, pool.Request{Owner: "a", Code: "x = 41"})
	wantStatus(t, plain, pool.StatusSuccess)
	if strings.Contains(plain.Warning, note) {
		t.Fatalf("the owner's first kernel: warning %q", plain.Warning)
	}
	other := run(t, p, pool.Request{Owner: "b", Tools: []string{"search"}, ToolHandler: echo, Code: "pass"})
	if strings.Contains(other.Warning, note) {
		t.Fatalf("owner b's first kernel warned about owner a's: %q", other.Warning)
	}

	moved := run(t, p, pool.Request{Owner: "a", Tools: []string{"search"}, ToolHandler: echo, Code: "print('x' in globals())"})
	wantStatus(t, moved, pool.StatusSuccess)
	if moved.Output != "False\n" || moved.Kernel.Reused || moved.Kernel.ID == plain.Kernel.ID {
		t.Fatalf("tools added: %+v; want a new kernel without x", moved)
	}
	for _, want := range []string{note, "tool set [search]", "tool set [], whose variables"} {
		if !strings.Contains(moved.Warning, want) {
			t.Errorf("tools added: warning %q lacks %q", moved.Warning, want)
		}
	}

	again := run(t, p, pool.Request{Owner: "a", Tools: []string{"search"}, ToolHandler: echo, Code: "pass"})
	if !again.Kernel.Reused || again.Kernel.ID != moved.Kernel.ID || strings.Contains(again.Warning, note) {
		t.Fatalf("same tools again: reused %v id %s (want %s), warning %q", again.Kernel.Reused, again.Kernel.ID, moved.Kernel.ID, again.Warning)
	}
	back := run(t, p, pool.Request{Owner: "a", Code: "print(x + 1)"})
	if back.Output != "42\n" || back.Kernel.ID != plain.Kernel.ID || strings.Contains(back.Warning, note) {
		t.Fatalf("no tools again: %+v; want the first kernel, x kept, no note", back)
	}
}
