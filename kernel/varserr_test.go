package kernel

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A kernel a __repr__ kills during a listing returns its *DeathError,
// wrapped with what that means for the listing: a death the sandbox
// blames on the OOM killer says the repr ran the kernel out of memory,
// any other says the kernel died during the listing. The OOM verdict is
// the sandbox's (recordingSandbox's), so no cgroup is needed.
func TestVariablesDeathSaysWhy(t *testing.T) {
	cases := []struct {
		name string
		oom  bool
		want string
	}{
		{"oom killer", true, "a __repr__ ran the kernel out of memory"},
		{"own death", false, "the kernel died during the listing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := baseSpec(t)
			spec.Sandbox = &recordingSandbox{inner: NewProcessGroup(), verdict: Verdict{OOMKilled: c.oom, MemoryLimit: 64 << 20}}
			k := startKernel(t, spec, "")
			mustExec(t, k, "import os\n"+
				"class Fatal:\n    def __repr__(self):\n        os.kill(os.getpid(), 9)\n"+
				"fatal = Fatal()")
			v, err := k.Variables(context.Background())
			if err == nil {
				t.Fatalf("listing succeeded: %+v", v)
			}
			var death *DeathError
			if !errors.As(err, &death) || death.OOMKilled != c.oom {
				t.Fatalf("error %v, want a DeathError with OOMKilled %v", err, c.oom)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q lacks %q", err, c.want)
			}
			<-k.Done() // the death is the kernel's end, not only the listing's
		})
	}
}

// A listing that fails in the kernel (here _kernpool_display's listing
// itself raises) is an error carrying the kernel's traceback, not a
// protocol error: the kernel keeps its state and serves on.
func TestVariablesFailureKeepsTheKernel(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, `import sys
def _boom(*args):
    raise RuntimeError("no listing today")
f = sys._getframe()
while "_staged" not in f.f_globals:
    f = f.f_back
f.f_globals["_staged"]("_kernpool_display").variables = _boom
del f, _boom
x = 3`)
	v, err := k.Variables(context.Background())
	if err == nil || errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "the listing failed") || !strings.Contains(err.Error(), "RuntimeError: no listing today") {
		t.Fatalf("listing %+v, %v; want the kernel's traceback of the failed listing", v, err)
	}
	if rep := mustExec(t, k, "x"); rep.Stdout != "3\n" {
		t.Fatalf("after the failed listing: %+v", rep)
	}
}

// A frame a __repr__ forges during a listing (a checkpoint C frame, while
// no save runs) breaks the protocol: the listing returns the protocol
// error itself, and the kernel is killed.
func TestVariablesForgedFrameIsAProtocolError(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	mustExec(t, k, `import os, sys
class Forger:
    def __repr__(self):
        f, r = sys._getframe(), None
        while f is not None and r is None:
            r = f.f_locals.get("self") if hasattr(f.f_locals.get("self"), "frame_fd") else None
            f = f.f_back
        os.write(r.frame_fd, b"\n" + r.sentinel + b" C 5\nhello")
        return "forged"
forger = Forger()`)
	v, err := k.Variables(context.Background())
	var death *DeathError
	if !errors.Is(err, ErrProtocol) || errors.As(err, &death) || !strings.Contains(err.Error(), "checkpoint data while no save runs") {
		t.Fatalf("listing %+v, %v; want the protocol error", v, err)
	}
	<-k.Done()
}
