//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
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

// TestShellToolHandlerCanceled cancels a call while its handler runs: the
// call returns with an error, the handler's process group is killed (a
// background child of the shell dies with it), and a grandchild that left
// the group but holds the output pipe cannot hold the call (WaitDelay).
// The grandchild outlives the test's patience, so the call returning at
// all while it still runs is what tells WaitDelay acted: without it the
// call waits for the pipe's end, which only the grandchild's exit brings.
func TestShellToolHandlerCanceled(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to judge the handler's children dead")
	}
	dir := t.TempDir()
	script := fmt.Sprintf(`sleep 300 & echo $! > %[1]s/child
setsid sh -c 'echo $$ > %[1]s/escaped.tmp; mv %[1]s/escaped.tmp %[1]s/escaped; exec sleep 3600' &
wait`, dir)
	t.Cleanup(func() { // the escaped grandchild is the test's to kill
		if pid := readPid(dir + "/escaped"); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if pid := readPid(dir + "/child"); pid > 0 && t.Failed() {
			_ = syscall.Kill(pid, syscall.SIGKILL) // one a broken cancel missed
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := shellToolHandler(script).HandleTool(ctx, pool.ToolCall{Tool: "x"})
		done <- err
	}()
	// The grandchild writes its pid once it has left the handler's group.
	waitUntil(t, "the handler to start", func() bool { return readPid(dir+"/escaped") > 0 && readPid(dir+"/child") > 0 })
	child, escaped := readPid(dir+"/child"), readPid(dir+"/escaped")
	cancel()
	// The group's kill ends the handler's shell at once; the call then waits
	// for the pipes the grandchild holds, bounded by WaitDelay: checked by
	// how it waits, not by waiting out a wait that nothing bounds.
	how := ""
	waitUntil(t, "the canceled call to wait for its pipes or return", func() bool {
		if len(done) > 0 {
			return true
		}
		how = pipeWait("TestShellToolHandlerCanceled")
		return how != ""
	})
	if how == "unbounded" {
		t.Fatal("the canceled call waits for its grandchild's pipe with nothing to end the wait: no WaitDelay")
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a canceled call succeeded")
		}
		if !procRunning(escaped) {
			t.Fatal("the call returned only once the grandchild holding its pipe was gone: WaitDelay did not end the wait")
		}
		// The group's SIGKILL came before the call returned, and marks
		// its targets at once: a child it missed is told now.
		if !testenv.Doomed(child) {
			t.Fatal("the handler's background child survives the canceled call: only its leader was killed")
		}
	case <-time.After(testenv.Patience):
		t.Fatalf("canceled call still waiting for its grandchild's pipe after %v", testenv.Patience)
	}
	waitUntil(t, "the handler's background child to die with its group", func() bool { return !procRunning(child) })
}

// readPid reads a pid a handler script wrote (0 if none).
func readPid(path string) int {
	b, _ := os.ReadFile(path)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// procRunning says whether pid is a live (non-zombie) process.
func procRunning(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}
