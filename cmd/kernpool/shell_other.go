//go:build !windows

package main

import (
	"context"
	"os/exec"
	"syscall"
)

// handlerCommand runs one --tool-handler command via sh -c in its own
// process group, so a canceled call (the daemon stopped waiting, the cell
// ended) kills the handler and everything it started, not only the shell.
func handlerCommand(ctx context.Context, cmdline string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", cmdline)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}
