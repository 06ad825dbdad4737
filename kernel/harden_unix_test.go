//go:build unix

package kernel

import (
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// sessionSandbox is a process-group sandbox whose Prepare starts the
// runner in a session of its own, as a sandbox may (setsid).
type sessionSandbox struct{ *ProcessGroup }

func (s sessionSandbox) Prepare(cmd *exec.Cmd, _ string) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return nil
}

// TestSandboxProcAttrKept: what the sandbox's Prepare set on the runner's
// process attributes survives the kernel's own hardening: a sandbox that
// asks for a session gets a runner that leads one.
func TestSandboxProcAttrKept(t *testing.T) {
	spec := baseSpec(t)
	spec.Sandbox = sessionSandbox{NewProcessGroup()}
	k := startKernel(t, spec, "")
	sid, err := unix.Getsid(k.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if sid != k.Pid() {
		t.Fatalf("runner %d is in session %d, want its own", k.Pid(), sid)
	}
}
