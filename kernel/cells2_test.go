package kernel

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// eventLog collects a streamed cell's events (the sink may be called
// from both reader goroutines).
type eventLog struct {
	mu     sync.Mutex
	events []Event
	first  chan Event // the first event, once
}

func newEventLog() *eventLog { return &eventLog{first: make(chan Event, 1)} }

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == 0 {
		l.first <- e
	}
	l.events = append(l.events, e)
}

func (l *eventLog) text(kind EventKind) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, e := range l.events {
		if e.Kind == kind {
			b.Write(e.Data)
		}
	}
	return b.String()
}

// The first chunk arrives while the cell still runs (the cell waits for
// a file the test writes only after it saw the chunk).
func TestStreamFirstChunkBeforeCellEnds(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	gate := t.TempDir() + "/go"
	log := newEventLog()
	done := make(chan *Reply, 1)
	code := "import os, sys, time\nprint('a')\nwhile not os.path.exists(" + pyStr(gate) + "): time.sleep(0.01)\n" +
		"print('b')\nprint('e', file=sys.stderr)\n_ = os.write(1, b'fd\\n')"
	go func() {
		rep, err := k.Exec(context.Background(), Cell{Code: code, Stream: log.add})
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	// "a" alone: the scanner holds a trailing newline back until it knows
	// it does not start a marker.
	if e := <-log.first; e.Kind != EventStdout || strings.TrimSpace(string(e.Data)) != "a" {
		t.Fatalf("first event %s %q, want stdout \"a\"", e.Kind, e.Data)
	}
	select {
	case <-done:
		t.Fatal("the cell ended before its gate opened")
	default:
	}
	mustWrite(t, gate, "")
	rep := <-done
	if got := log.text(EventStdout); got != "a\nb\nfd\n" {
		t.Fatalf("streamed stdout %q", got)
	}
	if got := log.text(EventStderr); got != "e\n" {
		t.Fatalf("streamed stderr %q", got)
	}
	if rep.Stdout != "a\nb\nfd\n" || rep.Stderr != "e\n" || rep.Status != "ok" {
		t.Fatalf("reply %+v", rep)
	}
}

// A partial line (no newline) in a streamed cell still arrives while the
// cell runs: the runner flushes its live writers on a timer. The cell
// counts the flusher thread's naps (its time.sleep calls) and, two naps
// after the print, so with a flush begun after it in between, writes "|"
// past its buffer: "partial" must come first. The cell then waits for the
// test to see it, so it arrives while the cell runs.
func TestStreamPartialLineBeforeCellEnds(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	gate := t.TempDir() + "/go"
	log := newEventLog()
	done := make(chan *Reply, 1)
	code := "import os, time, _thread\nmain, nap, naps = _thread.get_ident(), time.sleep, []\n" +
		"def counted(s):\n    if _thread.get_ident() != main: naps.append(s)\n    nap(s)\n" +
		"time.sleep = counted\ntry:\n    print('partial', end='')\n    n = len(naps)\n" +
		"    while len(naps) < n + 2: nap(0.01)\nfinally:\n    time.sleep = nap\nos.write(1, b'|')\n" +
		"while not os.path.exists(" + pyStr(gate) + "): time.sleep(0.01)\nprint(' rest')"
	go func() {
		rep, err := k.Exec(context.Background(), Cell{Code: code, Stream: log.add})
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	select {
	case e := <-log.first:
		if e.Kind != EventStdout || !strings.HasPrefix(string(e.Data), "partial") {
			mustWrite(t, gate, "")
			<-done
			t.Fatalf("first event %s %q, want stdout starting \"partial\": a flush sends it before the \"|\"", e.Kind, e.Data)
		}
	case <-time.After(testenv.Patience): // the cell waits for the gate forever
		mustWrite(t, gate, "")
		<-done
		t.Fatal("nothing arrived while the cell ran")
	}
	select {
	case <-done:
		t.Fatal("the cell ended before its gate opened")
	default:
	}
	mustWrite(t, gate, "")
	if rep := <-done; rep.Stdout != "partial| rest\n" || log.text(EventStdout) != "partial| rest\n" {
		t.Fatalf("reply stdout %q, streamed %q", rep.Stdout, log.text(EventStdout))
	}
}

// Streaming keeps to the raw stdout cap: what is streamed is what is kept.
func TestStreamCapped(t *testing.T) {
	spec := baseSpec(t)
	spec.RawStdoutCap = 1000
	k := startKernel(t, spec, "")
	log := newEventLog()
	rep, err := k.Exec(context.Background(), Cell{Code: "print('x' * 5000)", Stream: log.add})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(log.text(EventStdout)); got != 1000 {
		t.Fatalf("streamed %d bytes, want the cap 1000", got)
	}
	if !rep.StdoutClipped || rep.StdoutBytesTotal != 5001 {
		t.Fatalf("reply clipped=%v total=%d", rep.StdoutClipped, rep.StdoutBytesTotal)
	}
}

func TestDisplays(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "class P:\n    def _repr_png_(self): return b'\\x89PNG-bytes'\n"+
		"class H:\n    def _repr_html_(self): return '<b>hi</b>'\n    def __repr__(self): return 'H()'\n"+
		"class M:\n    def _repr_mimebundle_(self, include=None, exclude=None): return {'text/markdown': '# t'}\n")
	log := newEventLog()
	rep, err := k.Exec(context.Background(), Cell{Code: "print('before')\ndisplay(P())\nprint('after')\nH()", Stream: log.add})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Displays) != 2 {
		t.Fatalf("displays %+v", rep.Displays)
	}
	var png string
	_ = json.Unmarshal(rep.Displays[0].Data["image/png"], &png)
	if raw, _ := base64.StdEncoding.DecodeString(png); string(raw) != "\x89PNG-bytes" {
		t.Fatalf("png %q", png)
	}
	var html, plain string
	_ = json.Unmarshal(rep.Displays[1].Data["text/html"], &html)
	_ = json.Unmarshal(rep.Displays[1].Data["text/plain"], &plain)
	if html != "<b>hi</b>" || plain != "H()" || rep.Stdout != "before\nafter\n" {
		t.Fatalf("html %q plain %q stdout %q", html, plain, rep.Stdout)
	}
	// The stream keeps the order: before, display, after, display.
	var order strings.Builder
	for _, e := range log.events {
		if e.Kind == EventDisplay {
			order.WriteString("<D>")
		}
		order.Write(e.Data)
	}
	if order.String() != "before\n<D>after\n<D>" {
		t.Fatalf("order %q", order.String())
	}
	if rep := mustExec(t, k, "M()"); len(rep.Displays) != 1 || string(rep.Displays[0].Data["text/markdown"]) != `"# t"` {
		t.Fatalf("mimebundle %+v", rep.Displays)
	}
	// Over the cap: dropped and counted, the cell still succeeds.
	rep = mustExec(t, k, "class Big:\n    def _repr_html_(self): return 'x' * (5 << 20)\ndisplay(Big())")
	if len(rep.Displays) != 0 || rep.DisplaysDropped != 1 {
		t.Fatalf("big display: %d kept, %d dropped", len(rep.Displays), rep.DisplaysDropped)
	}
}

func TestMatplotlibFigure(t *testing.T) {
	if exec.Command(testenv.Python, "-c", "import matplotlib").Run() != nil {
		t.Skip("needs python3-matplotlib")
	}
	k := startKernel(t, baseSpec(t), "")
	for _, code := range []string{
		"import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()",
		"plt.figure(); plt.bar([1], [2]);", // still open at the cell's end
	} {
		rep := mustExec(t, k, code)
		if len(rep.Displays) != 1 || rep.Stderr != "" {
			t.Fatalf("%q: %d displays, stderr %q, traceback %s", code, len(rep.Displays), rep.Stderr, rep.Traceback)
		}
		var png string
		_ = json.Unmarshal(rep.Displays[0].Data["image/png"], &png)
		if raw, _ := base64.StdEncoding.DecodeString(png); !strings.HasPrefix(string(raw), "\x89PNG\r\n") {
			t.Fatalf("not a PNG: %.20q", raw)
		}
	}
	if got := mustExec(t, k, "import matplotlib; matplotlib.get_backend()").Stdout; got != "'agg'\n" {
		t.Fatalf("backend %q", got)
	}
}

func TestVariables(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "import os\nx = 42\nname = 'a' * 1000\nitems = [1, 2, 3]\n_hidden = 1")
	v, err := k.Variables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Variable{}
	for _, e := range v.Variables {
		got[e.Name] = e
	}
	if len(got) != 4 || v.Total != 4 || got["x"].Type != "int" || got["x"].Repr != "42" || got["os"].Type != "module" {
		t.Fatalf("variables %+v", v)
	}
	if l := got["items"].Len; l == nil || *l != 3 {
		t.Fatalf("items len %v", l)
	}
	if r := got["name"].Repr; len(r) > 200 || !strings.HasPrefix(r, "'aaa") {
		t.Fatalf("name repr %d bytes: %.30q", len(r), r)
	}
	// The listing ran no cell: the counter did not move.
	if rep := mustExec(t, k, "x"); rep.ExecutionCount != 2 {
		t.Fatalf("execution count %d after a listing, want 2", rep.ExecutionCount)
	}
}

func pyStr(s string) string { b, _ := json.Marshal(s); return string(b) }

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
