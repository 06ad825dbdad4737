//go:build unix

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
)

func TestShellToolHandler(t *testing.T) {
	call := pool.ToolCall{ID: "t1", Tool: "echo", Args: json.RawMessage(`{"text":"hi"}`)}
	tests := []struct {
		name, cmd, want, errWant string
	}{
		{"stdout is the result", `cat`, `{"id":"t1","tool":"echo","args":{"text":"hi"}}`, ""},
		{"exact bytes", `printf 'a\nb'`, "a\nb", ""},
		{"non-zero exit carries stderr", `echo broken >&2; exit 4`, "", "tool echo failed: broken"},
		{"non-zero exit without stderr", `exit 5`, "", "exit status 5"},
		{"oversized output", `head -c 9000000 /dev/zero`, "", "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := shellToolHandler(tt.cmd).HandleTool(context.Background(), call)
			if tt.errWant != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errWant) {
					t.Fatalf("err = %v, want %q", err, tt.errWant)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestShellToolHandlerCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := shellToolHandler(`sleep 30`).HandleTool(ctx, pool.ToolCall{Tool: "x"}); err == nil {
		t.Fatal("a canceled call succeeded")
	}
}
