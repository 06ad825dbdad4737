//go:build unix

package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// A display of exactly DisplayBytes is within the limit: it is read,
// decoded and delivered, and the kernel lives (one byte more is refused,
// TestForgedFrames' siblings check that side). The D frame is forged by
// the cell through the test sentinel.
func TestDisplayAtTheLimitDelivered(t *testing.T) {
	k := startKernel(t, baseSpec(t), testSentinel)
	code := "import os\n" +
		"head, tail = b'{\"data\":{\"text/plain\":\"', b'\"}}'\n" +
		"n = " + itoa(DisplayBytes) + "\n" +
		"body = head + b'x' * (n - len(head) - len(tail)) + tail\n" +
		"assert len(body) == n\n" +
		"os.write(1, b'\\n" + testSentinel + " D ' + str(n).encode() + b'\\n' + body)\n" +
		"None"
	rep := mustExec(t, k, code)
	if len(rep.Displays) != 1 {
		t.Fatalf("%d displays, want the one of exactly the limit", len(rep.Displays))
	}
	var text string
	if err := json.Unmarshal(rep.Displays[0].Data["text/plain"], &text); err != nil {
		t.Fatal(err)
	}
	if want := DisplayBytes - len(`{"data":{"text/plain":""}}`); len(text) != want || strings.Trim(text, "x") != "" {
		t.Fatalf("display text of %d bytes, want %d x's", len(text), want)
	}
	mustExec(t, k, "1") // still in sync
}

// A reply frame of exactly Spec.MaxFrameBytes is within the limit: its
// header is accepted and its body read. The forged frame names another
// request, so the kernel then dies of that, not of the frame's size.
func TestReplyFrameAtTheLimitRead(t *testing.T) {
	const limit = 4096
	spec := baseSpec(t)
	spec.MaxFrameBytes = limit
	k := startKernel(t, spec, testSentinel)
	code := "import os, time\n" +
		"head, tail = b'{\"id\":\"99\",\"status\":\"ok\",\"stdout\":\"', b'\"}'\n" +
		"body = head + b'x' * (" + itoa(limit) + " - len(head) - len(tail)) + tail\n" +
		"os.write(1, b'\\n" + testSentinel + " ' + str(len(body)).encode() + b'\\n' + body)\n" +
		"time.sleep(60)"
	err := execErr(t, k, context.Background(), code, ErrProtocol)
	if !strings.Contains(err.Error(), `reply frame for request "99"`) {
		t.Fatalf("error %q, want the frame read and refused for its request id", err)
	}
}

// TestDefaultMaxFrameBytesIsTheDefault: the exported DefaultMaxFrameBytes
// is what a Spec with every cap at its default gets (its doc says so, and
// embedders size by it): 13971712 bytes, the limit the oversized-header
// test sees in the error.
func TestDefaultMaxFrameBytesIsTheDefault(t *testing.T) {
	var s Spec
	s.fillCaps()
	if s.MaxFrameBytes != DefaultMaxFrameBytes || DefaultMaxFrameBytes != 13971712 {
		t.Fatalf("a default Spec's MaxFrameBytes is %d, DefaultMaxFrameBytes %d; want both 13971712", s.MaxFrameBytes, DefaultMaxFrameBytes)
	}
}

// defaultBudget is Budget() of a Spec with every cap at its default, added
// up by hand from the documented caps: the reply frame's members at their
// caps (stdout and stderr 1_000_000 each, their tails 65_536 each, the
// exception's traceback, evalue and frames 65_536 each and ename 256, and
// eight small members of 64 bytes), the fd-level output kept (heads of
// 1_000_000 each, tails of 65_536 each) and the cell's displays (4 MiB).
const defaultBudget = 1_000_000 + 1_000_000 + 2*65_536 + 3*65_536 + 256 + 8*64 +
	1_000_000 + 1_000_000 + 2*65_536 + 4<<20

// A kernel may make the daemon hold exactly its budget for one cell, and
// not one byte more. The cell forges D frames (charged exactly their size)
// through the test sentinel; at the limit it then kills itself, since its
// reply frame would be charged too, and its displays come back with the
// death; one byte past it, the last display is a protocol error.
func TestBudgetAtTheLimit(t *testing.T) {
	if got := baseSpec(t).Budget(); got != defaultBudget {
		t.Fatalf("a default Spec's Budget() is %d, want %d", got, defaultBudget)
	}
	forge := func(total int, then string) string {
		return "import os, time\n" +
			"head, tail = b'{\"data\":{\"text/plain\":\"', b'\"}}'\n" +
			"left = " + itoa(total) + "\n" +
			"while left:\n" +
			"    n = min(left, " + itoa(DisplayBytes) + ")\n" +
			"    left -= n\n" +
			"    data = b'\\n" + testSentinel + " D ' + str(n).encode() + b'\\n' + head + b'x' * (n - len(head) - len(tail)) + tail\n" +
			"    while data:\n" +
			"        data = data[os.write(1, data):]\n" + then
	}
	t.Run("at the limit", func(t *testing.T) {
		k := startKernel(t, baseSpec(t), testSentinel)
		// The cell kills itself once the test saw its third display (a
		// death drains the pipes only for a while: a slow host could lose
		// a display still in the pipe).
		flag := testTempDir(t) + "/seen"
		seen := make(chan struct{})
		displays := 0
		sink := func(e Event) { // called by the stdout reader alone
			if e.Kind == EventDisplay {
				if displays++; displays == 3 {
					close(seen)
				}
			}
		}
		type result struct {
			rep *Reply
			err error
		}
		done := make(chan result, 1)
		go func() {
			code := forge(defaultBudget, "while not os.path.exists("+pyStr(flag)+"):\n    time.sleep(0.01)\nos.kill(os.getpid(), 9)")
			rep, err := k.Exec(context.Background(), Cell{Code: code, Stream: sink})
			done <- result{rep, err}
		}()
		var r result
		select {
		case <-seen:
			mustWrite(t, flag, "")
			r = <-done
		case r = <-done:
		}
		var death *DeathError
		if !errors.As(r.err, &death) || r.rep == nil || len(r.rep.Displays) != 3 {
			n := -1
			if r.rep != nil {
				n = len(r.rep.Displays)
			}
			t.Fatalf("%d displays (-1: no reply), error %v; want 3 and the cell's own SIGKILL", n, r.err)
		}
	})
	t.Run("one byte past it", func(t *testing.T) {
		k := startKernel(t, baseSpec(t), testSentinel)
		err := execErr(t, k, context.Background(), forge(defaultBudget+1, "time.sleep(60)"), ErrProtocol)
		if !strings.Contains(err.Error(), "memory budget") {
			t.Fatalf("error %q does not name the budget", err)
		}
	})
}
