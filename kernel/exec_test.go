package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

func TestPersistenceAndExecutionCount(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	cells := []struct {
		code, stdout string
	}{
		{"x = 1", ""},
		{"x += 41", ""},
		{"import json", ""},
		{"print(x, json.dumps([x]))", "42 [42]\n"},
	}
	for i, c := range cells {
		r := mustExec(t, k, c.code)
		if r.Status != "ok" || r.Stdout != c.stdout || r.ExecutionCount != i+1 {
			t.Fatalf("cell %d %q: got status %q stdout %q count %d", i, c.code, r.Status, r.Stdout, r.ExecutionCount)
		}
	}
}

func TestExceptionKeepsKernel(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "state = 'kept'")
	r := mustExec(t, k, "def f():\n    return 1/0\nprint('before')\nf()")
	if r.Status != "error" || r.ExitCode != 1 || r.Stdout != "before\n" {
		t.Fatalf("got %+v", r)
	}
	for _, want := range []string{`File "<cell-2>", line 4, in <module>`, "return 1/0", "ZeroDivisionError"} {
		if !strings.Contains(r.Traceback, want) {
			t.Errorf("traceback lacks %q:\n%s", want, r.Traceback)
		}
	}
	if strings.Contains(r.Traceback, "runner.py") || strings.Contains(r.Traceback, "_run") {
		t.Errorf("traceback shows runner frames:\n%s", r.Traceback)
	}
	if r := mustExec(t, k, "print(state)"); r.Stdout != "kept\n" {
		t.Fatalf("state lost after exception: %+v", r)
	}
	r = mustExec(t, k, "def (:")
	if r.Status != "error" || !strings.Contains(r.Traceback, "SyntaxError") || strings.Contains(r.Traceback, "runner.py") {
		t.Fatalf("syntax error: %+v", r)
	}
	r = mustExec(t, k, "import traceback\ntry:\n    1/0\nexcept Exception:\n    traceback.print_exc()")
	if !strings.Contains(r.Stderr, "    1/0") {
		t.Fatalf("linecache does not know the cell source: %q", r.Stderr)
	}
}

func TestFinalExpressionDisplay(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	cases := []struct{ code, want string }{
		{"1 + 1", "2\n"},
		{"None", ""},
		{"y = 5\ny", "5\n"},
		{"_ * 3", "15\n"},
		{"'s'", "'s'\n"},
		{"y = 6", ""},
		{"print('p')", "p\n"},
		{"[y for _ in range(2)]", "[6, 6]\n"},
		{"y  # comment", "6\n"},
		// The runner compiles a cell without its AST when the last line
		// is certainly a statement: the cases around that rule.
		{"y = 7; y", "7\n"},
		{"y = 7\n8", "8\n"},
		{"y == 7", "True\n"},
		{"y <= 7", "True\n"},
		{"y >= 8", "False\n"},
		{"y != 7", "False\n"},
		{"not y", "False\n"},
		{"y if y else 0", "7\n"},
		{"-1", "-1\n"},
		{"...", "Ellipsis\n"},
		{"y\n# a comment\n\n", "7\n"},
		{"y\n \t\n", "7\n"},
		{"y += 1", ""},
		{"y", "8\n"},
		{"w: int = 3", ""},
		{"v: int", ""},
		{"z = 1 + \\\n    y", ""},
		{"z == \\\n    9", "True\n"},
		{"f = lambda a=1: a", ""},
		{"(lambda a=1: a + 1)()", "2\n"},
		{"g = (lambda a=1:\n    a)", ""},
		{"if y:\n    y", ""},
		{"for i in range(2):\n    i\nelse: i", ""},
		{"import os", ""},
		{"del z", ""},
		{"pass", ""},
		{"s = \"\"\"\nq = 1\"\"\"", ""},
		{"str(\"\"\"\nq = 1\"\"\")", "'\\nq = 1'\n"},
		{"\"\"\"\nq = 1\"\"\"", "'\\nq = 1'\n"},
		{"", ""},
	}
	for _, c := range cases {
		if r := mustExec(t, k, c.code); r.Stdout != c.want || r.Status != "ok" {
			t.Errorf("%q: stdout %q (status %q), want %q", c.code, r.Stdout, r.Status, c.want)
		}
	}
	// A lambda's default looks like an assignment on the last line.
	if r := mustExec(t, k, "lambda a=1: a"); !strings.HasPrefix(r.Stdout, "<function <lambda> at ") {
		t.Errorf("a final lambda is not displayed: %+v", r)
	}
}

// TestCompileErrorsOnStatementCells: a cell whose last line is a statement
// is compiled from its text, not its AST; its compile errors, warnings and
// __future__ imports behave as the parser's path does.
func TestCompileErrorsOnStatementCells(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	// (The compiler's errors carry no source line, in either path.)
	r := mustExec(t, k, "x = 1\nbreak")
	if want := "  File \"<cell-1>\", line 2\nSyntaxError: 'break' outside loop\n"; r.Status != "error" || r.Traceback != want {
		t.Errorf("break outside a loop: traceback %q, want %q", r.Traceback, want)
	}
	r = mustExec(t, k, "x = 1\nfrom __future__ import braces")
	if r.Status != "error" || !strings.Contains(r.Traceback, "SyntaxError: from __future__ imports must occur at the beginning of the file") {
		t.Errorf("late __future__ import: %+v", r)
	}
	// The annotation is never evaluated under the future import; without
	// it, it is (a NameError).
	if r := mustExec(t, k, "from __future__ import annotations\nx: undefined_name = 1"); r.Status != "ok" {
		t.Errorf("from __future__ import annotations: %+v", r)
	}
	if r := mustExec(t, k, "x: undefined_name = 1"); r.Status != "error" || !strings.Contains(r.Traceback, "NameError") {
		t.Errorf("annotation evaluated without the future import: %+v", r)
	}
	r = mustExec(t, k, "import warnings\nwarnings.simplefilter('always')\nx = 1 is 1")
	if r.Status != "ok" || !strings.Contains(r.Stderr, `<cell-5>:3: SyntaxWarning: "is" with a literal`) {
		t.Errorf("compile warning: %+v", r)
	}
	if r := mustExec(t, k, "x = await asyncio.sleep(0, 'slept')"); r.Status != "error" || !strings.Contains(r.Traceback, "NameError") {
		t.Errorf("top-level await before asyncio is imported: %+v", r)
	}
	if r := mustExec(t, k, "import asyncio\nx = await asyncio.sleep(0, 'slept')\nprint(x)"); r.Stdout != "slept\n" {
		t.Errorf("top-level await in an assignment: %+v", r)
	}
}

func TestTopLevelAwait(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "import asyncio\nasync def twice(v):\n    await asyncio.sleep(0)\n    return 2 * v")
	if r := mustExec(t, k, "v = await twice(21)\nprint(v)"); r.Stdout != "42\n" {
		t.Fatalf("await statement: %+v", r)
	}
	if r := mustExec(t, k, "await twice(4)"); r.Stdout != "8\n" {
		t.Fatalf("await expression: %+v", r)
	}
	// The loop persists: a task made in one cell is awaited in the next.
	mustExec(t, k, "task = asyncio.ensure_future(twice(5))")
	if r := mustExec(t, k, "await task"); r.Stdout != "10\n" {
		t.Fatalf("task across cells: %+v", r)
	}
	if r := mustExec(t, k, "await asyncio.sleep(0)\nraise ValueError('inside')"); r.Status != "error" ||
		!strings.Contains(r.Traceback, "<cell-") || strings.Contains(r.Traceback, "base_events") {
		t.Fatalf("error in async cell: %+v", r)
	}
}

func TestSysExitEndsKernel(t *testing.T) {
	cases := []struct {
		code       string
		exit       int
		stderrWant string
	}{
		{"import sys; sys.exit()", 0, ""},
		{"import sys; sys.exit(3)", 3, ""},
		{"import sys; sys.exit('bye')", 1, "bye\n"},
		{"raise SystemExit(None)", 0, ""},
	}
	for _, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			k := startKernel(t, baseSpec(t), "")
			mustExec(t, k, "import subprocess; child = subprocess.Popen(['/bin/sleep', '60'])")
			pid := mustExec(t, k, "child.pid").Stdout
			r := mustExec(t, k, c.code)
			if r.Status != "exit" || r.ExitCode != c.exit || r.Stderr != c.stderrWant {
				t.Fatalf("got %+v", r)
			}
			select {
			case <-k.Done():
			default:
				t.Fatal("kernel still alive after sys.exit")
			}
			if alive(k.Pid()) || alive(atoi(t, pid)) {
				t.Fatal("a process survived sys.exit")
			}
			if _, err := k.Exec(context.Background(), Cell{Code: "1"}); !errors.Is(err, ErrClosed) {
				t.Fatalf("exec after exit: %v, want ErrClosed", err)
			}
		})
	}
}

func TestFdLevelOutputReachesReply(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	r := mustExec(t, k, "import subprocess, os\nprint('py')\nsubprocess.run(['echo', 'hi'])\nos.system('echo err >&2')\nos.write(1, b'raw\\n')\nNone")
	if r.Stdout != "py\nhi\nraw\n" || r.Stderr != "err\n" {
		t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	if r.StdoutBytesTotal != len(r.Stdout) {
		t.Fatalf("StdoutBytesTotal %d, want %d", r.StdoutBytesTotal, len(r.Stdout))
	}
}

func TestOutputBetweenCellsDropped(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	// The thread writes once the cell has ended (a file the test makes
	// after Exec returns), never while the cell may still be settling.
	flag := filepath.Join(t.TempDir(), "ended")
	mustExec(t, k, fmt.Sprintf("import os, threading, time\n"+
		"def noise():\n    while not os.path.exists(%q):\n        time.sleep(0.005)\n"+
		"    os.write(1, b'BETWEEN\\n')\n    os.write(2, b'BETWEEN-ERR\\n')\n"+
		"threading.Thread(target=noise, daemon=True).start()", flag))
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Wait until the readers saw the noise (polling is fine in a test). The
	// final "\n" may be held back as a possible marker start; it keeps the
	// epoch it was read in, so it is dropped too.
	arrived := func() bool {
		return strings.Contains(k.cell.stderrTail(), "BETWEEN-ERR") && k.DroppedOutput() >= int64(len("BETWEENBETWEEN-ERR"))
	}
	for end := time.Now().Add(testenv.Patience); !arrived(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the background output never arrived")
		}
	}
	r := mustExec(t, k, "print('second')")
	if r.Stdout != "second\n" || r.Stderr != "" {
		t.Fatalf("between-cell bytes leaked into the next cell: stdout %q stderr %q", r.Stdout, r.Stderr)
	}
}

// Python-level output over its cap keeps its first StdoutCap bytes and
// its real end (TailBytes), cut on character boundaries; fd-level output
// after it joins the tail.
func TestPythonOutputClipped(t *testing.T) {
	spec := baseSpec(t)
	spec.TailBytes = 1001 // an odd figure: the cut moves to a character start
	k := startKernel(t, spec, "")
	r := mustExec(t, k, "import sys\nprint('é' * 1_200_000, end='')\nprint('the end', end='')\nsys.stdout.flush()")
	if !r.StdoutClipped || len(r.Stdout) != CaptureChars || r.StdoutBytesTotal != 2_400_007 {
		t.Fatalf("clipped %v, %d bytes kept, total %d", r.StdoutClipped, len(r.Stdout), r.StdoutBytesTotal)
	}
	if want := strings.Repeat("é", 497) + "the end"; r.StdoutTail != want {
		t.Fatalf("tail %d bytes %.40q..., want %d bytes", len(r.StdoutTail), r.StdoutTail, len(want))
	}
	r = mustExec(t, k, "import os, sys\nprint('p' * 1_000_500, end='')\nsys.stdout.flush()\nos.write(1, b'fd end')\nNone")
	if len(r.Stdout) != CaptureChars || r.StdoutBytesTotal != 1_000_506 || r.StdoutTail != strings.Repeat("p", 500)+"fd end" {
		t.Fatalf("%d bytes kept, total %d, tail %q", len(r.Stdout), r.StdoutBytesTotal, r.StdoutTail)
	}
}

// fd-level output keeps its first RawStdoutCap (StderrCap) bytes and its
// last TailBytes.
func TestRawOutputCapped(t *testing.T) {
	spec := baseSpec(t)
	spec.RawStdoutCap = 1000
	spec.StderrCap = 500
	spec.TailBytes = 100
	k := startKernel(t, spec, "")
	r := mustExec(t, k, "import os\nos.write(1, b'o' * 5000 + b'O' * 50)\nos.write(2, b'e' * 5000 + b'E')\nNone")
	if len(r.Stdout) != 1000 || !r.StdoutClipped || r.StdoutBytesTotal != 5050 || len(r.Stderr) != 500 || r.StderrBytesTotal != 5001 {
		t.Fatalf("stdout %d clipped %v total %d stderr %d", len(r.Stdout), r.StdoutClipped, r.StdoutBytesTotal, len(r.Stderr))
	}
	if r.StdoutTail != strings.Repeat("o", 50)+strings.Repeat("O", 50) || r.StderrTail != strings.Repeat("e", 99)+"E" {
		t.Fatalf("tails %q %q", r.StdoutTail, r.StderrTail)
	}
}

func TestBusy(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	var first atomic.Value
	finished := make(chan struct{})
	// The first cell runs until the test has tried the second (the gate
	// file appears), however slowly the host runs the test.
	gate := filepath.Join(testTempDir(t), "gate")
	go func() {
		defer close(finished)
		_, err := k.Exec(context.Background(), Cell{Code: fmt.Sprintf("import os, time\nwhile not os.path.exists(%q): time.sleep(0.01)", gate)})
		first.Store(errBox{err})
	}()
	for !k.busy.Load() {
		time.Sleep(time.Millisecond)
	}
	if _, err := k.Exec(context.Background(), Cell{Code: "1"}); !errors.Is(err, ErrBusy) {
		t.Fatalf("concurrent exec: %v, want ErrBusy", err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	<-finished
	if err := first.Load().(errBox).err; err != nil {
		t.Fatalf("first cell: %v", err)
	}
	if r := mustExec(t, k, "'still alive'"); r.Stdout != "'still alive'\n" {
		t.Fatalf("after busy: %+v", r)
	}
}

type errBox struct{ err error }

func TestOddCellsKeepTheKernel(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	cases := []struct {
		name, code string
		status     ReplyStatus
		stdout     string
	}{
		{"empty", "", "ok", ""},
		{"only a comment", "# nothing", "ok", ""},
		{"NUL byte", "x = 1\x00", "error", ""},
		{"invalid UTF-8", "print('\xff')", "ok", "\ufffd\n"},
		{"lone surrogate", "print('\\ud800')", "ok", "\ufffd\n"},
		{"raw invalid UTF-8 on fd 1", "import os; os.write(1, b'\\xff\\n'); None", "ok", "\xff\n"},
		{"control characters", "print('\\x01\\x1b[31m\\u2028')", "ok", "\x01\x1b[31m\u2028\n"},
		{"input() sees EOF", "try:\n    input()\nexcept EOFError:\n    print('eof')", "ok", "eof\n"},
		{"KeyboardInterrupt", "raise KeyboardInterrupt", "error", ""},
		{"huge line", "s = '" + strings.Repeat("z", 3<<20) + "'\nlen(s)", "ok", "3145728\n"},
	}
	for i, c := range cases {
		r := mustExec(t, k, c.code)
		if r.Status != c.status || r.Stdout != c.stdout || r.ExecutionCount != i+1 {
			t.Errorf("%s: status %q stdout %q count %d; want %q %q %d (traceback %s)",
				c.name, r.Status, r.Stdout, r.ExecutionCount, c.status, c.stdout, i+1, r.Traceback)
		}
	}
}

func TestExecWithDoneContextRunsNothing(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := k.Exec(ctx, Cell{Code: "x = 1"}); !errors.Is(err, ErrCanceled) {
		t.Fatalf("exec with a canceled context: %v", err)
	}
	if got := mustExec(t, k, "'x' in globals()").Stdout; got != "False\n" {
		t.Fatalf("the canceled cell ran: %q", got)
	}
}
