package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// Cell.Env holds for its cell only, streamed or not, with values that need
// JSON escaping; the next cell sees the kernel's own environment again.
func TestCellEnvForOneCell(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	code := "import os\nprint(os.environ.get('KP_CELL'), os.environ.get('LANG'), os.environ.get('KP_QUOTE'))"
	cases := []struct {
		name   string
		env    map[string]string
		stream bool
		want   string
	}{
		{"set and override", map[string]string{"KP_CELL": "one", "LANG": "C", "KP_QUOTE": `a"b é\n`}, false, "one C a\"b é\\n\n"},
		{"streamed", map[string]string{"KP_CELL": "two"}, true, "two C.UTF-8 None\n"},
		{"a value larger than the request", map[string]string{"KP_CELL": strings.Repeat("v", 4096)}, false, strings.Repeat("v", 4096) + " C.UTF-8 None\n"},
		{"restored after", nil, false, "None C.UTF-8 None\n"},
	}
	for _, c := range cases {
		cell := Cell{Code: code, Env: c.env}
		if c.stream {
			cell.Stream = func(Event) {}
		}
		rep, err := k.Exec(context.Background(), cell)
		if err != nil || rep.Status != ReplyOK || rep.Stdout != c.want {
			t.Fatalf("%s: reply %+v, error %v; want stdout %q", c.name, rep, err, c.want)
		}
	}
}

// A cell that kills its kernel returns the fd-level output and displays it
// already produced with the error; one that produced nothing returns no
// reply at all. The cell dies once the test saw its output streamed (a
// death drains the pipes only for a while).
func TestKilledCellKeepsWhatItProduced(t *testing.T) {
	cases := []struct {
		name, code     string
		reply          bool
		stdout, stderr string
		html           string // the one display's text/html, "" for none
	}{
		{"nothing", "pass", false, "", "", ""},
		{"fd-level stdout", "import os\nos.write(1, b'partial')", true, "partial", "", ""},
		{"fd-level stderr only", "import os\nos.write(2, b'last words')", true, "", "last words", ""},
		{"a display only", "class H:\n    def _repr_html_(self): return '<b>kept</b>'\n    def __repr__(self): return 'H()'\n" +
			"display(H())", true, "", "", "<b>kept</b>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := startKernel(t, baseSpec(t), "")
			flag := testTempDir(t) + "/seen"
			log := newEventLog()
			code := c.code + "\nimport os, time\n"
			if c.reply {
				code += "while not os.path.exists(" + pyStr(flag) + "):\n    time.sleep(0.01)\n"
			}
			code += "os.kill(os.getpid(), 9)"
			type result struct {
				rep *Reply
				err error
			}
			done := make(chan result, 1)
			go func() {
				rep, err := k.Exec(context.Background(), Cell{Code: code, Stream: log.add})
				done <- result{rep, err}
			}()
			var r result
			select {
			case <-log.first:
				mustWrite(t, flag, "")
				r = <-done
			case r = <-done:
			}
			var death *DeathError
			if !errors.As(r.err, &death) || death.Signal != "SIGKILL" {
				t.Fatalf("error %v, want a SIGKILL DeathError", r.err)
			}
			rep := r.rep
			if !c.reply {
				if rep != nil {
					t.Fatalf("a reply %+v for a cell that produced nothing", rep)
				}
				return
			}
			if rep == nil {
				t.Fatal("no reply: the cell's output is lost")
			}
			if rep.Stdout != c.stdout || rep.Stderr != c.stderr || rep.StdoutBytesTotal != len(c.stdout) || rep.StderrBytesTotal != len(c.stderr) {
				t.Fatalf("stdout %q (%d) stderr %q (%d); want %q %q",
					rep.Stdout, rep.StdoutBytesTotal, rep.Stderr, rep.StderrBytesTotal, c.stdout, c.stderr)
			}
			var html string
			if len(rep.Displays) == 1 {
				_ = json.Unmarshal(rep.Displays[0].Data["text/html"], &html)
			}
			if wantN := map[bool]int{false: 0, true: 1}[c.html != ""]; len(rep.Displays) != wantN || html != c.html {
				t.Fatalf("%d displays (html %q), want %d (%q)", len(rep.Displays), html, wantN, c.html)
			}
		})
	}
}

// A streamed cell's sink gets only events with bytes in them: output past
// the cap (here the second line) is counted, not sent as an empty event.
func TestStreamSendsNoEmptyEvents(t *testing.T) {
	spec := baseSpec(t)
	spec.RawStdoutCap = 1000
	k := startKernel(t, spec, "")
	log := newEventLog()
	rep, err := k.Exec(context.Background(), Cell{Code: "print('x' * 1000)\nprint('y')", Stream: log.add})
	if err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	for i, e := range log.events {
		if len(e.Data) == 0 && e.Display == nil {
			t.Errorf("event %d (%s) is empty", i, e.Kind)
		}
	}
	log.mu.Unlock()
	x := strings.Repeat("x", 1000)
	if got := log.text(EventStdout); got != x || rep.Stdout != x || rep.StdoutBytesTotal != 1003 {
		t.Fatalf("streamed %d bytes, reply %d of %d; want 1000 of 1003", len(got), len(rep.Stdout), rep.StdoutBytesTotal)
	}
}

// A reply frame that comes while no cell runs (a thread of an earlier cell
// forging one) breaks the protocol, and the kernel's error says so.
func TestFrameBetweenCellsKillsTheKernel(t *testing.T) {
	k := startKernel(t, baseSpec(t), testSentinel)
	flag := testTempDir(t) + "/ended"
	body := `{"id":"1","status":"ok"}`
	mustExec(t, k, "import os, threading, time\n"+
		"def forge():\n    while not os.path.exists("+pyStr(flag)+"):\n        time.sleep(0.005)\n"+
		"    os.write(1, b'\\n"+testSentinel+" "+itoa(len(body))+"\\n"+strings.ReplaceAll(body, `"`, `\"`)+"')\n"+
		"threading.Thread(target=forge, daemon=True).start()")
	mustWrite(t, flag, "")
	<-k.Done() // the forged frame kills the kernel (else this test times out)
	if err := k.Err(); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "reply frame while no cell runs") {
		t.Fatalf("Err() = %v, want the protocol error of a frame while no cell runs", err)
	}
}

// Exec is handed a context that ends while Exec arms the write's deadline,
// before the deadline could cut the request: the request was written
// whole, so the cell is interrupted with its grace and the kernel stays.
// The request is larger than the request pipe holds, so that its rest
// waits in that write (one the pipe takes at once arms nothing).
func TestContextEndingAroundTheWriteInterrupts(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	ctx := &endsOnAfterFunc{done: make(chan struct{})}
	code := "#" + strings.Repeat("x", 1<<20) + "\nimport time\ntime.sleep(60)"
	type result struct {
		rep *Reply
		err error
	}
	res := make(chan result, 1)
	go func() {
		rep, err := k.Exec(ctx, Cell{Code: code, Grace: testenv.Patience})
		res <- result{rep, err}
	}()
	// Once Exec waits for the cell its request is written: a newline now is
	// a blank line the runner skips, but it ends a request whose rest was
	// not written, and the runner's malformed-request reply fails Exec at
	// once instead of the cell never beginning.
	testenv.WaitFor(t, "Exec past its write", func() bool {
		return len(res) == 1 || goroutineIn("TestContextEndingAroundTheWriteInterrupts", "kernel.(*Kernel).wait")
	})
	if _, err := k.stdin.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	r := <-res
	rep, err := r.rep, r.err
	if err != nil || !errors.Is(rep.Interrupted, ErrCanceled) || !strings.Contains(rep.Traceback, "KeyboardInterrupt") {
		t.Fatalf("reply %+v, error %v; want the cell interrupted and the kernel kept", rep, err)
	}
	if got := mustExec(t, k, "'alive'").Stdout; got != "'alive'\n" {
		t.Fatalf("after the interrupt: %q", got)
	}
}

// endsOnAfterFunc is a context that ends when context.AfterFunc registers
// on it (which asks a parent with an AfterFunc method): the end races
// Exec's write, and the callback that would cut the write has not run yet
// when Exec stops it (stop reports it stopped the callback, which then
// never runs). Exec's only registration is that one.
type endsOnAfterFunc struct {
	mu   sync.Mutex
	done chan struct{}
	err  error
}

func (c *endsOnAfterFunc) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *endsOnAfterFunc) Done() <-chan struct{}       { return c.done }
func (c *endsOnAfterFunc) Value(any) any               { return nil }

func (c *endsOnAfterFunc) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *endsOnAfterFunc) AfterFunc(func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = context.Canceled
		close(c.done)
	}
	return func() bool { return true }
}

// A namespace of more than MaxVariables names lists exactly MaxVariables
// of them, with the true total.
func TestVariablesAtTheirLimit(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "globals().update({'v%04d' % j: j for j in range(1005)})")
	v, err := k.Variables(context.Background())
	if err != nil || len(v.Variables) != 1000 || v.Total != 1005 || v.Variables[0].Name != "v0000" {
		t.Fatalf("listing %d of %d, %v; want 1000 of 1005", len(v.Variables), v.Total, err)
	}
}
