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
