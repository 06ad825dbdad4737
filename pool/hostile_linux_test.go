package pool

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// findSentinel is cell code that digs the runner's frame sentinel out of
// the runner's own frames, as an attacker would.
const findSentinel = `import os, sys
f, sent = sys._getframe(), None
while f is not None and sent is None:
    sent = getattr(f.f_locals.get("self"), "sentinel", None)
    f = f.f_back
assert sent, "sentinel not found"
`

// Inline caps of the default pipeline: the stdout head/tail, stderr, and
// the traceback (capped like stderr); each plus its truncation notice.
const (
	capNotice    = 128
	maxOutput    = 50_000 + 2*10_000 + 3*capNotice + 64
	maxErrorText = 10_000 + capNotice + 256
)

// A cell that forges reply frames with the real sentinel: a 60 MB claim is
// refused from its header, and a frame under the limit with every member
// at its cap that then repeats one is refused at the repeat; either way
// the kernel is killed, the result says why in plain words, the daemon's
// memory stays bounded and other owners are served throughout.
func TestHostileForgedFrames(t *testing.T) {
	testenv.RequirePython(t)
	cases := []struct {
		name, code, detail string
	}{
		{"60 MB frame", findSentinel + `
os.write(1, b"\n" + sent + b" 60000000\n")
chunk = b"x" * (1 << 20)
for _ in range(60):
    os.write(1, chunk)
`, "a reply frame of 60000000 bytes exceeds the 37971712-byte limit"},
		{"members at their caps, then repeated", findSentinel + `
big = b'"' + b"x" * 4_000_000 + b'"'
body = b'{"id":"1","status":"ok","stdout":' + big + b',"stderr":' + big[:1_000_000] + b'","stdout":' + big + b'}'
os.write(1, b"\n" + sent + b" " + str(len(body)).encode() + b"\n" + body)
import time; time.sleep(60)
`, `frame repeats member "stdout"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newTestPool(t, func(cfg *Config) { cfg.Output = realOutput{} })
			var res *Result
			underAttack(t, p, func() { res = run(t, p, Request{Owner: "attacker", Code: c.code}) })
			if res.Status != StatusError || res.ExitCode != -1 || !strings.Contains(res.Error, "broke the wire protocol") ||
				!strings.Contains(res.Error, c.detail) || !strings.Contains(res.Error, "it was killed") {
				t.Fatalf("result %+v, want a protocol error saying %q", res, c.detail)
			}
			t.Log(assertResultBounded(t, res, maxOutput, maxErrorText))
			if len(p.List()) != 1 { // the bystander's only
				t.Fatalf("kernels %+v: the attacker's kernel survived", p.List())
			}
		})
	}
}

// A 4 MB exception message: capped in the runner (64 KiB) and again in
// the daemon like stderr, in both error and output; the kernel keeps its
// state. The same for a 4 MB SystemExit message, which ends the kernel.
func TestHostileHugeException(t *testing.T) {
	p := newTestPool(t, func(cfg *Config) { cfg.Output = realOutput{} })
	var res *Result
	underAttack(t, p, func() {
		res = run(t, p, Request{Owner: "a", Code: "kept = 1\nraise ValueError('head' + 'x' * 4_000_000 + 'tail')"})
	})
	wantStatus(t, res, StatusError)
	if !strings.HasPrefix(res.Error, "Traceback") || !strings.Contains(res.Error, "OUTPUT TRUNCATED") || !strings.HasSuffix(strings.TrimSpace(res.Error), "tail") {
		t.Fatalf("error is not a capped traceback (head, notice, tail): %.200q ... %.200q", res.Error, res.Error[max(len(res.Error)-200, 0):])
	}
	t.Log(assertResultBounded(t, res, maxOutput, maxErrorText))
	if again := run(t, p, Request{Owner: "a", Code: "kept"}); again.Output != "1\n" || !again.Kernel.Reused {
		t.Fatalf("the kernel lost its state after the exception: %+v", again)
	}
	exit := run(t, p, Request{Owner: "a", Code: "raise SystemExit('y' * 4_000_000)"})
	if !exit.Kernel.Ended {
		t.Fatalf("SystemExit did not end the kernel: %+v", exit)
	}
	t.Log(assertResultBounded(t, exit, maxOutput, maxErrorText))
}

// Output a thread of an earlier cell writes while no cell runs (Python
// prints left in the interpreter's buffer, fd-level writes to stdout and
// stderr) reaches no cell; it is dropped and counted exactly, and the
// count is in the kernel listing.
func TestHostileOutputBetweenCells(t *testing.T) {
	rec := newRecorder()
	p := newTestPool(t, func(c *Config) { c.Observer = rec })
	dir := testTempDir(t)
	settled, flag := filepath.Join(dir, "settled"), filepath.Join(dir, "done")
	const lines = 50
	// The thread writes only once the test saw the cell's result (the file
	// settled appears), so every byte lands between cells.
	res := run(t, p, Request{Owner: "a", Code: fmt.Sprintf(`import os, sys, threading, time
def noise():
    while not os.path.exists(%q):
        time.sleep(0.01)
    for i in range(%d):
        print("bg-%%03d" %% i)               # Python-level: buffered, flushed later
        os.write(1, b"fd-%%03d\n" %% i)
        os.write(2, b"er-%%03d\n" %% i)
    open(%q, "w").close()
threading.Thread(target=noise).start()
"started"`, settled, lines, flag)})
	if res.Output != "'started'\n" {
		t.Fatalf("first cell output %q", res.Output)
	}
	if err := os.WriteFile(settled, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the background thread to finish", func() bool { _, err := os.Stat(flag); return err == nil })
	second := run(t, p, Request{Owner: "a", Code: "print('two')"})
	if second.Output != "two\n" {
		t.Fatalf("output written between cells reached the next cell: %q", second.Output)
	}
	ks := p.List()
	if want := int64(lines * 3 * len("bg-000\n")); len(ks) != 1 || ks[0].DroppedOutputBytes != want {
		t.Fatalf("listing %+v, want dropped_output_bytes %d", ks, want)
	}
	// The observer (the metrics) gets the count with the kernel's next cell.
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := int64(lines * 3 * len("bg-000\n")); len(rec.cells) != 2 || rec.cells[0].BetweenCellsBytes != 0 || rec.cells[1].BetweenCellsBytes != want {
		t.Fatalf("cell events %+v, want between-cells bytes 0 then %d", rec.cells, want)
	}
}
