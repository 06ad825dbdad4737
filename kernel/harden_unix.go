//go:build unix && !linux

package kernel

import (
	"os/exec"
	"syscall"
)

// hardenProcAttr puts the runner in its own process group (unless the
// sandbox chose a session). There is no Pdeathsig here: the runner's stdin
// watcher alone takes the kernel down when its host dies.
func hardenProcAttr(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if !cmd.SysProcAttr.Setsid {
		cmd.SysProcAttr.Setpgid = true
	}
}
