//go:build unix

package kernel

import (
	"os/exec"
	"syscall"
)

// hardenProcAttr makes the kernel die with its host where the platform
// can (setDeathSignal), and puts the runner in its own process group unless
// the sandbox chose a session (setsid makes it a group leader already).
func hardenProcAttr(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if !cmd.SysProcAttr.Setsid {
		cmd.SysProcAttr.Setpgid = true
	}
	setDeathSignal(cmd.SysProcAttr)
}
