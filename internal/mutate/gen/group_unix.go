//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// ownGroup puts cmd in its own process group and has a cancel kill the
// whole group: a test's kernels and helpers end with it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
