package kernel

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

// A group whose only member is a zombie (killed, not yet reaped: here its
// parent, the test, waits for it only afterwards; a lazy container init
// does so for seconds) is gone for Release: kill(-pgid, 0) still finds
// the zombie, /proc says it does not run, and Release returns at once
// instead of failing after its 2 s bound.
func TestGroupSandboxReleaseCountsZombiesAsGone(t *testing.T) {
	requireProc(t)
	sb := NewProcessGroup()
	cmd := exec.Command("/bin/sleep", "1000")
	if err := sb.Prepare(cmd, ""); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() { _ = cmd.Wait() }()
	if err := sb.Started(pid); err != nil {
		_ = cmd.Process.Kill()
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitDead(pid, testenv.Patience) {
		t.Fatalf("pid %d did not die", pid)
	}
	if err := syscall.Kill(-pid, 0); err != nil {
		t.Fatalf("kill(-%d, 0) = %v: the zombie should still be a member", pid, err)
	}
	if _, err := sb.Release(); err != nil {
		t.Fatalf("Release of a group of one zombie: %v", err)
	}
	if errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH) {
		t.Fatal("the zombie was reaped before the test waited for it")
	}
}
