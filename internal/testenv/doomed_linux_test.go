package testenv

import (
	"os/exec"
	"syscall"
	"testing"
)

// Doomed is false for a running process and true right after SIGKILL,
// before the process is reaped, and after.
func TestDoomed(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep to run: %v", err)
	}
	pid := cmd.Process.Pid
	if Doomed(pid) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("a running process is doomed")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	doomed := Doomed(pid) // before the wait: pending, exiting or a zombie
	_ = cmd.Wait()
	if !doomed || !Doomed(pid) {
		t.Fatalf("after SIGKILL: doomed %t before the wait, %t after", doomed, Doomed(pid))
	}
}
