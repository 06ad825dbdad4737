package kernel

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// deathError without a process state (wait failed): exit code -1, the
// signal unknown with wait's error, the verdict's OOM limit kept.
func TestDeathErrorWithoutProcessState(t *testing.T) {
	d := deathError(nil, errors.New("no child"), Verdict{OOMKilled: true, MemoryLimit: 64 << 20}, "last words")
	if d.ExitCode != -1 || d.Signal != "unknown (no child)" || !d.OOMKilled || d.MemoryLimit != 64<<20 || d.Stderr != "last words" {
		t.Fatalf("death %+v", d)
	}
}

// failingSandbox mounts a tmpfs on the staging dir and leaves it mounted
// (so the staging dir cannot be removed), and reports errors from Kill
// and Release after doing their work.
type failingSandbox struct{ *mountingSandbox }

func (f failingSandbox) Kill() error {
	_ = f.mountingSandbox.Kill()
	return errors.New("kill refused")
}

func (f failingSandbox) Release() (Verdict, error) {
	_, _ = f.ProcessGroup.Release()
	return Verdict{}, errors.New("release refused")
}

// Teardown warns about a sandbox that failed to kill or release and a
// staging dir it could not remove, and about nothing when all went well.
func TestTeardownWarnsOnlyOnFailures(t *testing.T) {
	warnings := []string{"sandbox kill failed", "sandbox release failed", "cannot remove staging dir"}
	for _, failing := range []bool{false, true} {
		var logs lockedBuffer
		spec := baseSpec(t)
		spec.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: &logs})
		ms := &mountingSandbox{ProcessGroup: NewProcessGroup(), size: "8m"}
		t.Cleanup(ms.unmount)
		spec.Sandbox = ms
		if failing {
			spec.Sandbox = failingSandbox{ms}
		}
		k, err := Start(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, k, "1")
		_ = k.Kill()
		<-k.Done()
		ms.unmount()
		_ = os.RemoveAll(k.StagingDir())
		for _, w := range warnings {
			if got := strings.Contains(logs.String(), w); got != failing {
				t.Errorf("failing %v: warning %q logged %v; logs:\n%s", failing, w, got, logs.String())
			}
		}
	}
}
