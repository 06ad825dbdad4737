package kernel

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/kernpool/kernpool/internal/testenv"
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
		var logs testenv.SyncBuffer
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

// A kernel that dies with output still in its pipe, read by a reader that a
// slow streaming client held up until the runner was reaped: teardown
// drains the pipe (for a while) before it closes it, so the cell's reply
// counts every byte it wrote.
func TestDeathDrainsThePipeAfterASlowClient(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	var once sync.Once
	sink := func(e Event) {
		if e.Kind == EventStdout {
			once.Do(func() { <-k.exited }) // holds up the stdout reader
		}
	}
	code := "import os\nos.write(1, b'a' * 1000)\n" +
		"data = b'b' * 500_000\nwhile data:\n    data = data[os.write(1, data):]\nos._exit(3)"
	rep, err := k.Exec(context.Background(), Cell{Code: code, Stream: sink})
	var death *DeathError
	if !errors.As(err, &death) || death.ExitCode != 3 || rep == nil {
		t.Fatalf("reply %v, error %v; want exit 3 with a reply", rep != nil, err)
	}
	if rep.StdoutBytesTotal != 501_000 {
		t.Fatalf("%d bytes of stdout counted, want all 501000", rep.StdoutBytesTotal)
	}
}
