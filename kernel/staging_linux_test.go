package kernel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// mountingSandbox is the process-group sandbox with a StagingMounter's
// hook: it mounts a tmpfs of size (when set) on the staging dir, as
// package isolate does, and fails the mount with err (when set). Release
// unmounts.
type mountingSandbox struct {
	*ProcessGroup
	size string
	err  error

	mu      sync.Mutex
	mounted string
}

func (m *mountingSandbox) MountStaging(staging string) (bool, error) {
	if m.err != nil {
		return false, m.err
	}
	if m.size != "" {
		if err := unix.Mount("tmpfs", staging, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,size="+m.size); err != nil {
			return false, err
		}
		m.mu.Lock()
		m.mounted = staging
		m.mu.Unlock()
	}
	return true, nil
}

func (m *mountingSandbox) Release() (Verdict, error) {
	m.unmount()
	return m.ProcessGroup.Release()
}

func (m *mountingSandbox) unmount() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mounted != "" {
		_ = unix.Unmount(m.mounted, unix.MNT_DETACH)
		m.mounted = ""
	}
}

// What a StagingMounter says reaches the kernel: a mount makes HOME the
// kernel's TMPDIR, a failed mount fails Start (and releases the sandbox).
func TestStagingMounterMountsAndFailures(t *testing.T) {
	spec := baseSpec(t)
	spec.Sandbox = &mountingSandbox{ProcessGroup: NewProcessGroup()}
	k := startKernel(t, spec, "")
	if got, want := mustExec(t, k, "import os\nprint(os.environ['HOME'])").Stdout, filepath.Join(k.StagingDir(), "tmp")+"\n"; got != want {
		t.Fatalf("HOME %q, want the kernel's TMPDIR %q", got, want)
	}

	spec = baseSpec(t)
	spec.Sandbox = &mountingSandbox{ProcessGroup: NewProcessGroup(), err: errors.New("no tmpfs today")}
	if k, err := Start(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "mount staging dir: no tmpfs today") {
		if err == nil {
			k.Kill()
		}
		t.Fatalf("Start with a failing mount: %v", err)
	}
}

// A staging file that does not fit the staging dir's filesystem fails
// Start with the write's error, not with a kernel holding a cut file.
func TestStagingFileWriteErrorFailsStart(t *testing.T) {
	spec := baseSpec(t)
	sb := &mountingSandbox{ProcessGroup: NewProcessGroup(), size: "1m"}
	t.Cleanup(sb.unmount)
	spec.Sandbox = sb
	spec.Files = map[string][]byte{"big.bin": make([]byte, 2<<20)}
	k, err := Start(context.Background(), spec)
	if err == nil {
		k.Kill()
		t.Fatal("Start succeeded with a 2 MiB file on a 1 MiB staging dir")
	}
	if !errors.Is(err, unix.ENOSPC) || !strings.Contains(err.Error(), "write staging file") {
		t.Fatalf("Start: %v, want the write's ENOSPC", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(spec.StateDir, "kernels", spec.ID)); len(entries) != 0 {
		t.Fatalf("staging files left behind: %v", entries)
	}
}

// Every staging file and every variable of Setup reaches the kernel, also
// when Setup gives more variables than Spec.Env holds.
func TestStagingFilesAndSetupEnvReachTheKernel(t *testing.T) {
	spec := baseSpec(t)
	var setup []string
	var want strings.Builder
	for i := range 12 {
		setup = append(setup, "KP_SETUP_"+itoa(i)+"="+itoa(i*i))
		want.WriteString(itoa(i*i) + " ")
	}
	spec.Setup = func(string) ([]string, error) { return setup, nil }
	spec.Files = map[string][]byte{"kp_one.py": []byte("A = 1\n"), "kp_two.py": []byte("B = 2\n"), "kp_three.py": []byte("C = 3\n")}
	k := startKernel(t, spec, "")
	rep := mustExec(t, k, "import os, kp_one, kp_two, kp_three\n"+
		"print(*(os.environ['KP_SETUP_%d' % i] for i in range(12)), end=' ')\nprint(kp_one.A, kp_two.B, kp_three.C)")
	if w := want.String() + "1 2 3\n"; rep.Stdout != w {
		t.Fatalf("stdout %q (traceback %s), want %q", rep.Stdout, rep.Traceback, w)
	}
}
