//go:build unix

package pool_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"
)

// What a cell killed past its interrupt's grace printed survives where it
// reached the kernel's file descriptors (docs/api.md, "Timeouts and
// interrupts"): a streamed cell's lines go out as it writes them, so its
// print()s are kept; a buffered cell's print()s wait in the interpreter
// for the cell's end and die with it, while its fd-level writes are kept.
func TestKillPastGraceKeepsWhatReachedTheFds(t *testing.T) {
	const marker = "\n[execution interrupted — the kernel was killed]"
	for _, tc := range []struct {
		name   string
		stream bool
		want   string
	}{
		{"streamed", true, "printed\nwritten\n" + marker},
		{"buffered", false, "written\n" + marker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPool(t, func(c *pool.Config) {
				c.Policies = map[string]pool.CellPolicy{"default": {InterruptGrace: 100 * time.Millisecond}}
			})
			warm := run(t, p, pool.Request{Code: "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)"})
			started := filepath.Join(testTempDir(t), "started")
			req := pool.Request{Code: fmt.Sprintf("import os, sys\nprint('printed')\nos.write(1, b'written\\n')\nopen(%q, 'w').close()\nwhile True: pass", started)}
			if tc.stream {
				req.Stream = func(pool.Event) {}
			}
			resc := make(chan *pool.Result, 1)
			go func() {
				res, err := p.Execute(context.Background(), req)
				if err != nil {
					t.Errorf("execute: %v", err)
				}
				resc <- res
			}()
			waitFor(t, "the cell to run", func() bool { _, err := os.Stat(started); return err == nil })
			if err := p.Interrupt(warm.Kernel.ID); err != nil {
				t.Fatalf("interrupt: %v", err)
			}
			res := <-resc
			if res == nil || res.Status != pool.StatusInterrupted || res.Kernel.StatePreserved {
				t.Fatalf("cell ignoring SIGINT: %+v; want interrupted, the kernel killed", res)
			}
			if res.Output != tc.want {
				t.Errorf("output %q, want %q", res.Output, tc.want)
			}
		})
	}
}
