package kernel

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Each failing cell reports its exception structured as Jupyter does:
// ename, evalue, and traceback entries whose concatenation is the text.
func TestStructuredException(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	for _, tc := range []struct {
		name, code, ename, evalue string
		entries                   []string // substrings of some entry
	}{
		{"NameError", "x = 1\nundefined_name", "NameError", "name 'undefined_name' is not defined",
			[]string{"Traceback (most recent call last):\n", `File "<cell-1>", line 2, in <module>`}},
		{"SyntaxError", "def (:", "SyntaxError", "invalid syntax (<cell-2>, line 1)", []string{"SyntaxError: invalid syntax"}},
		{"chained", "try:\n    1/0\nexcept ZeroDivisionError as e:\n    raise ValueError('bad') from e", "ValueError", "bad",
			[]string{"ZeroDivisionError: division by zero", "The above exception was the direct cause", "ValueError: bad\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustExec(t, k, tc.code)
			e := r.Exception
			if r.Status != ReplyError || e == nil {
				t.Fatalf("reply %+v: no exception", r)
			}
			if e.EName != tc.ename || e.EValue != tc.evalue {
				t.Errorf("ename %q evalue %q, want %q %q", e.EName, e.EValue, tc.ename, tc.evalue)
			}
			if got := strings.Join(e.Traceback, ""); got != r.Traceback {
				t.Errorf("entries joined:\n%s\ndiffer from the traceback text:\n%s", got, r.Traceback)
			}
			for _, want := range tc.entries {
				if !strings.Contains(r.Traceback, want) {
					t.Errorf("traceback lacks %q:\n%s", want, r.Traceback)
				}
			}
			requireNoOwnFrames(t, k, r)
		})
	}
	if r := mustExec(t, k, "print('fine')"); r.Exception != nil || r.Stdout != "fine\n" {
		t.Fatalf("a cell that raised nothing: %+v", r)
	}
}

// requireNoOwnFrames fails when the runner's files or the staging dir's
// path show in any tenant-visible part of r's exception.
func requireNoOwnFrames(t *testing.T, k *Kernel, r *Reply) {
	t.Helper()
	parts := append([]string{r.Traceback, r.Exception.EValue}, r.Exception.Traceback...)
	for _, p := range parts {
		for _, bad := range []string{k.StagingDir(), "runner.py", "_kernpool_", "kernpool_tools.py"} {
			if strings.Contains(p, bad) {
				t.Errorf("exception shows %q:\n%s", bad, p)
			}
		}
	}
}

// An exception raised inside kernpool's own staged files (here: a module
// staged like the tool stub, raising from a handler of another error)
// shows neither their frames, nor the internal exception it chained
// from, nor the staging dir's path in its message.
func TestExceptionHidesOwnFramesAndPaths(t *testing.T) {
	spec := baseSpec(t)
	spec.Files = map[string][]byte{"kernpool_tools.py": []byte(
		"import os\nclass ToolError(Exception):\n    pass\n" +
			"def _decode():\n    try:\n        int('x')\n    except ValueError:\n" +
			"        raise ToolError('cannot reach ' + os.path.join(os.path.dirname(__file__), 'tools.sock'))\n" +
			"def search(**kw):\n    return _decode()\n")}
	k := startKernel(t, spec, "")
	r := mustExec(t, k, "import sys\nsys.path.insert(0, "+quote(k.StagingDir())+")\nimport kernpool_tools\nkernpool_tools.search(q=1)")
	e := r.Exception
	if e == nil || e.EName != "ToolError" || e.EValue != "cannot reach "+StagingName+"/tools.sock" {
		t.Fatalf("exception %+v, traceback:\n%s", e, r.Traceback)
	}
	if !strings.Contains(r.Traceback, `File "<cell-1>", line 4, in <module>`) || strings.Contains(r.Traceback, "ValueError") {
		t.Errorf("traceback:\n%s", r.Traceback)
	}
	requireNoOwnFrames(t, k, r)
}

// A 4 MB exception message is capped in every field, in UTF-8 bytes.
func TestHugeExceptionBounded(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	r := mustExec(t, k, "raise ValueError('é' * (2 << 20))") // 4 MiB of UTF-8
	e := r.Exception
	if e == nil || e.EName != "ValueError" {
		t.Fatalf("reply %+v", r)
	}
	total := 0
	for _, entry := range e.Traceback {
		total += len(entry) + 1
		if !utf8.ValidString(entry) {
			t.Fatalf("an entry was cut inside a character")
		}
	}
	for name, n := range map[string]int{"traceback": len(r.Traceback), "evalue": len(e.EValue), "entries": total} {
		if n > TracebackBytes || n < TracebackBytes/2 {
			t.Errorf("%s holds %d bytes, want at most %d (and most of it)", name, n, TracebackBytes)
		}
	}
	for _, s := range []string{r.Traceback, e.EValue} {
		if !strings.Contains(s, "bytes omitted out of 4,194,") {
			t.Errorf("no truncation notice naming the full size in %.200q", s)
		}
	}
}

// A forged frame cannot make an exception carry more entries than the
// runner sends, nor one without a class name.
func TestForgedExceptionEntriesBounded(t *testing.T) {
	rep, err := decodeReply([]byte(`{"id":"1","status":"error","ename":"E","evalue":"v","frames":"` +
		strings.Repeat(`a\u0000`, 300) + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	e := rep.exception()
	if e == nil || len(e.Traceback) != 101 {
		t.Fatalf("exception %+v, want 101 entries", e)
	}
	if rep, err := decodeReply([]byte(`{"id":"1","status":"error","frames":"a"}`)); err != nil || rep.exception() != nil {
		t.Fatalf("an exception without ename: %v %v", rep, err)
	}
}
