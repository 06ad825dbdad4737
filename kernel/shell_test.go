package kernel

import (
	"os"
	"strings"
	"testing"
)

// requireIPython skips without IPython's transformer in the interpreter
// (Debian: python3-ipython; .ci/run installs it).
func requireIPython(t *testing.T, k *Kernel) {
	t.Helper()
	if r := mustExec(t, k, "import importlib.util\nprint(importlib.util.find_spec('IPython') is not None)"); r.Stdout != "True\n" {
		t.Skip("IPython is not importable by the test interpreter (apt-get install python3-ipython)")
	}
}

// Shell lines and magics run with IPython's rewriting, their output
// captured in order with the cell's own.
func TestShellLinesAndMagics(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	requireIPython(t, k)
	dir := testTempDir(t)
	for _, tc := range []struct {
		name, code string
		check      func(r *Reply) bool
	}{
		{"shell line in order", "print('a')\n!echo b; echo e >&2\nprint('c')", func(r *Reply) bool {
			return r.Stdout == "a\nb\nc\n" && r.Stderr == "e\n"
		}},
		{"expansion and exit code", "n = 3\nfor i in range(2):\n    !echo {i}-{n}\n!exit 7\nprint(_exit_code)", func(r *Reply) bool {
			return r.Stdout == "0-3\n1-3\n7\n"
		}},
		{"captured output", "x = !echo one; echo two\nprint(x)", func(r *Reply) bool { return r.Stdout == "['one', 'two']\n" }},
		{"pip", "%pip --version", func(r *Reply) bool {
			return r.Status == ReplyOK && strings.HasPrefix(r.Stdout, "pip ") && strings.Contains(r.Stdout, "python 3")
		}},
		{"cd and pwd", "%cd " + dir + "\nimport os\nhere = %pwd\nprint(os.getcwd() == here)", func(r *Reply) bool {
			return r.Stdout == dir+"\nTrue\n"
		}},
		{"env", "%env KP_MAGIC=on\nimport os\nv = %env KP_MAGIC\nprint(os.environ['KP_MAGIC'], v)", func(r *Reply) bool {
			return r.Stdout == "env: KP_MAGIC=on\non on\n"
		}},
		{"time", "%time y = sum(range(10))\nprint(y)", func(r *Reply) bool {
			return strings.Contains(r.Stdout, "CPU times: user ") && strings.Contains(r.Stdout, "Wall time: ") && strings.HasSuffix(r.Stdout, "45\n")
		}},
		{"bash cell", "%%bash\necho $((1 + 2))\necho to-err >&2", func(r *Reply) bool { return r.Stdout == "3\n" && r.Stderr == "to-err\n" }},
		{"writefile", "%%writefile " + dir + "/w.txt\nhello file\n", func(r *Reply) bool {
			b, err := os.ReadFile(dir + "/w.txt")
			return err == nil && string(b) == "hello file\n" && r.Stdout == "Writing "+dir+"/w.txt\n"
		}},
		{"a string line starting with % stays Python", "s = '''\n%d items\n!x'''\nprint(s % 3)", func(r *Reply) bool {
			return r.Stdout == "\n3 items\n!x\n"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustExec(t, k, tc.code)
			if r.Status != ReplyOK || !tc.check(r) {
				t.Fatalf("status %s stdout %q stderr %q traceback:\n%s", r.Status, r.Stdout, r.Stderr, r.Traceback)
			}
		})
	}
	r := mustExec(t, k, "%lsmagic")
	if r.Exception == nil || r.Exception.EName != "MagicError" || !strings.Contains(r.Exception.EValue, "%lsmagic is not a magic kernpool runs; it runs the line magics %cd") {
		t.Fatalf("unknown magic: %+v", r.Exception)
	}
	requireNoOwnFrames(t, k, r)
}

// Without IPython (the interpreter cannot import it: the cell's sys.path
// lost the directories that hold it, or it was never installed) a shell
// line fails with a message saying so, and the kernel lives on. It runs
// whether or not the host has IPython.
func TestShellLinesWithoutIPython(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, "import sys, importlib.util\nsys.path[:] = [p for p in sys.path if not p.endswith(('dist-packages', 'site-packages'))]\n"+
		"assert importlib.util.find_spec('IPython') is None")
	for _, code := range []string{"!echo hi", "%pip --version"} {
		r := mustExec(t, k, code)
		e := r.Exception
		if e == nil || e.EName != "MagicError" || !strings.Contains(e.EValue, "`!` shell lines and `%` magics need IPython, which this kernel's interpreter") ||
			!strings.Contains(e.EValue, "apt-get install python3-ipython") {
			t.Fatalf("%s: %+v", code, e)
		}
		requireNoOwnFrames(t, k, r)
	}
	if r := mustExec(t, k, "print('alive')"); r.Stdout != "alive\n" {
		t.Fatalf("%+v", r)
	}
}

// input() says stdin is not available, as an EOFError.
func TestInputSaysNoStdin(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	r := mustExec(t, k, "try:\n    input('name? ')\nexcept EOFError as e:\n    print(type(e).__name__, isinstance(e, EOFError))\ninput()")
	e := r.Exception
	if r.Stdout != "StdinNotAvailableError True\n" || e == nil || e.EName != "StdinNotAvailableError" ||
		!strings.HasPrefix(e.EValue, "input() is not available in a kernpool cell: a cell has no stdin.") {
		t.Fatalf("stdout %q exception %+v", r.Stdout, e)
	}
	requireNoOwnFrames(t, k, r)
}
