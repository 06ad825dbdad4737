package kernel

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// recordingSandbox wraps the real process-group sandbox, records the calls
// kernel makes and can report a given verdict (the OOM plumbing; the real
// OOM verdict comes from package isolate's cgroup sandbox).
type recordingSandbox struct {
	inner   Sandbox
	verdict Verdict

	mu    sync.Mutex
	calls []string
}

func (r *recordingSandbox) record(c string) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

func (r *recordingSandbox) Prepare(cmd *exec.Cmd, staging string) error {
	r.record("prepare")
	return r.inner.Prepare(cmd, staging)
}
func (r *recordingSandbox) Started(pid int) error { r.record("started"); return r.inner.Started(pid) }
func (r *recordingSandbox) Kill() error           { r.record("kill"); return r.inner.Kill() }
func (r *recordingSandbox) Release() (Verdict, error) {
	r.record("release")
	_, err := r.inner.Release()
	return r.verdict, err
}
func (r *recordingSandbox) Stats() (Stats, error) { return Stats{Pids: 1}, nil }
func (r *recordingSandbox) UID() int              { return -1 }
func (r *recordingSandbox) Isolation() Isolation  { return r.inner.Isolation() }

func (r *recordingSandbox) releases() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if c == "release" {
			n++
		}
	}
	return n
}

func (r *recordingSandbox) sequence() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		if len(out) == 0 || out[len(out)-1] != c {
			out = append(out, c)
		}
	}
	return strings.Join(out, ",")
}

func TestSandboxLifecycleAndOOMVerdict(t *testing.T) {
	spec := baseSpec(t)
	sb := &recordingSandbox{inner: NewProcessGroup(), verdict: Verdict{OOMKilled: true, MemoryLimit: 64 << 20}}
	spec.Sandbox = sb
	k := startKernel(t, spec, "")
	if st, err := k.Stats(); err != nil || st.Pids != 1 {
		t.Fatalf("stats %+v %v", st, err)
	}
	_, err := k.Exec(context.Background(), Cell{Code: "import os; os.kill(os.getpid(), 9)"})
	var death *DeathError
	if !errors.As(err, &death) || !death.OOMKilled || death.MemoryLimit != 64<<20 {
		t.Fatalf("error %v, want an OOM DeathError", err)
	}
	if !strings.Contains(err.Error(), "out-of-memory killer at its memory limit of 64MiB") {
		t.Fatalf("message %q", err)
	}
	if v := k.Verdict(); !v.OOMKilled {
		t.Fatalf("verdict %+v", v)
	}
	k.Kill()
	if got := sb.sequence(); got != "prepare,started,kill,release" {
		t.Fatalf("sandbox calls %s", got)
	}
}
